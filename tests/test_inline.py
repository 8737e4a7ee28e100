"""A paragraph's items as inline markup and back (documents/inline.py): runs, wrappers and kept things."""

from tnmt.documents.inline import Keep, Text, fragment, items, plain_run

FORMATS = [b"", b"<b/>", b""]


def test_runs_wrappers_and_kept_things_make_one_fragment():
    read = [Text(0, "Read "), Text(1, "the site", (0,)), Keep(0, wrappers=(0,)), Text(2, " now"), Keep(1, breaks=True)]
    assert fragment(read, FORMATS) == (
        'Read <span data-wrap="0"><span data-run="1">the site</span><img data-keep="0"></span> now<br data-keep="1">'
    )


def test_a_fragment_reads_back_into_the_items_it_was_made_of():
    read = [Text(0, "A & B "), Text(1, "bold", (0, 1)), Text(0, " x", (0,)), Keep(3), Text(2, " end")]
    back = items(fragment(read, FORMATS))
    assert back == [Text(None, "A & B "), Text(1, "bold", (0, 1)), Text(None, " x", (0,)), Keep(3), Text(None, " end")]


def test_text_outside_every_run_is_the_plain_run_s_and_control_characters_are_dropped():
    assert items('one <span data-run="1">two</span>\x01 three') == [
        Text(None, "one "),
        Text(1, "two"),
        Text(None, " three"),
    ]
    assert plain_run(["a", "bbbb", "cc"], [b"x", b"y", b"x"]) == 1  # the commonest by characters
