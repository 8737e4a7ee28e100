"""tag_transfer: the cut of a parent's target words among its children, placement of elements without
words, spacing, and whole transfers over hand-built trees (test_markup covers them through HTML)."""

import pytest

from tnmt.documents.tag_transfer import Element, anchor, join, segment, transfer

BOLD, ITAL = 0, 1  # child indices in `labels`
OTHER = -1


@pytest.mark.parametrize(
    ("labels", "order", "expected"),
    [
        ([BOLD, BOLD, ITAL, ITAL], [BOLD, ITAL], {BOLD: (0, 2), ITAL: (2, 4)}),
        ([ITAL, ITAL, BOLD, BOLD], [ITAL, BOLD], {ITAL: (0, 2), BOLD: (2, 4)}),  # siblings in the translation's order
        ([OTHER, BOLD, OTHER], [BOLD], {BOLD: (1, 2)}),
        ([None, BOLD, None, BOLD, None], [BOLD], {BOLD: (1, 4)}),  # unaligned: left out at the edges, kept between
        (
            [BOLD, ITAL, BOLD, BOLD, ITAL],
            [BOLD, ITAL],
            {BOLD: (0, 4), ITAL: (4, 5)},
        ),  # the crossing word goes to the majority
        ([BOLD, OTHER, OTHER, BOLD], [BOLD], {BOLD: (0, 1)}),  # two strays outweigh one word: no covering span
        ([BOLD, OTHER, BOLD, BOLD], [BOLD], {BOLD: (0, 4)}),  # one stray for two words: the covering span
        ([BOLD, BOLD], [BOLD, ITAL], {BOLD: (0, 2), ITAL: (2, 2)}),  # ITAL's words all went to BOLD: empty, after it
        ([], [BOLD, ITAL], {BOLD: (0, 0), ITAL: (0, 0)}),
    ],
)
def test_segment_cuts_covering_spans_where_fewest_words_go_astray(labels, order, expected):
    assert segment(labels, order) == expected


def test_an_element_with_a_tag_in_another_sentence_runs_to_the_sentence_edge():
    opened_before = Element(end="</b>", first=0, last=1, pin_start=True)  # "<b>...<p>red</b> car"
    closed_after = Element(start="<i>", first=1, last=2, pin_end=True)  # "red <i>car<p>...</i>"
    root = Element(first=0, last=2, children=[opened_before, closed_after])
    assert transfer(root, "das rote Auto", [(0, 1), (1, 2)]) == "das rote</b> <i>Auto"
    # crossed: the bold must end before the italic starts, so one of them holds no word (a tie: the first cut)
    assert transfer(root, "Auto rot", [(0, 1), (1, 0)]) == "</b><i>Auto rot"


def test_anchor_follows_or_precedes_the_nearest_aligned_word():
    parent = Element(first=0, last=4)
    targets = [[3], [], [0], [1]]  # source word 1 is not aligned
    after_word_0 = Element(first=1, last=1, touches_previous=True)
    before_word_1 = Element(first=1, last=1)
    assert anchor(after_word_0, parent, (0, 4), targets) == 4  # after target word 3
    assert anchor(before_word_1, parent, (0, 4), targets) == 0  # word 1 unaligned: before word 2's target 0
    assert anchor(Element(first=1, last=2), parent, (0, 4), targets) == 4  # had words: after the word before
    assert anchor(Element(first=1, last=1), parent, (0, 4), [[], [], [], []]) == 1  # nothing aligned: pro rata
    assert anchor(Element(pin_end=True), parent, (0, 4), targets) == 4


def test_an_element_without_words_is_moved_out_of_the_sibling_its_anchor_fell_into():
    image = Element(start="<img>", first=1, last=1)  # before source word 1
    bold = Element(start="<b>", end="</b>", first=2, last=3)
    root = Element(first=0, last=3, children=[image, bold])
    # word 1's target sits between the two targets of the bold's word: before the bold, not inside it
    assert transfer(root, "zz yy zz", [(1, 1), (2, 0), (2, 2)]) == "<img><b>zz yy zz</b>"
    image.touches_previous = True  # it followed word 0, which is not aligned: next to word 1, after the bold
    assert transfer(root, "zz yy zz", [(1, 1), (2, 0), (2, 2)]) == "<b>zz yy zz</b><img>"


def test_join_puts_one_space_between_words_outside_the_tags():
    tokens = [("<i>", "tag"), ("a", "word"), ("</i>", "glued"), ("<img>", "glued"), ("<b>", "tag"), ("b", "word")]
    assert join(tokens) == "<i>a</i><img> <b>b"
    assert join([("a", "word"), ("<br/>", "tag")]) == "a<br/>"  # no space after the last word


def _tree() -> Element:
    """'The <b>big <i>red</i></b> car': three source words."""
    italic = Element(start="<i>", end="</i>", first=2, last=3)
    bold = Element(start="<b>", end="</b>", first=1, last=3, children=[italic])
    return Element(first=0, last=4, children=[bold])


def test_transfer_nests_the_child_inside_its_parents_part():
    # "Das große rote Auto" / "La grande voiture rouge": the italic word moves, and stays inside the bold
    assert transfer(_tree(), "Das große rote Auto", [(0, 0), (1, 1), (2, 2), (3, 3)]) == (
        "Das <b>große <i>rote</i></b> Auto"
    )
    assert transfer(_tree(), "La grande voiture rouge", [(0, 0), (1, 1), (2, 3), (3, 2)]) == (
        "La <b>grande voiture <i>rouge</i></b>"  # bold's words 1 and 3 outweigh the car's 2 between them
    )


def test_transfer_clips_a_child_to_its_parent():
    # red also aligned to a word outside the bold part: the italic cannot leave its parent
    alignment = [(0, 0), (1, 1), (2, 2), (2, 3), (3, 3), (0, 3)]
    assert transfer(_tree(), "Das große rote Auto", alignment) == "Das <b>große <i>rote</i></b> Auto"


def test_transfer_keeps_an_element_whose_words_vanished():
    assert transfer(_tree(), "Das Auto", [(0, 0), (3, 1)]) == "Das<b><i></i></b> Auto"


def test_transfer_rejects_alignment_outside_the_sentence():
    with pytest.raises(ValueError, match="outside 4 source x 2 target words"):
        transfer(_tree(), "Das Auto", [(0, 2)])


def test_an_element_keeps_a_word_its_own_word_is_aligned_to_however_many_others_are():
    # "The <b>red</b> car" -> "Das rote Auto" with "rote" aligned to "red" and also to "The" and "car" (an
    # adjective's writing step already looks at its noun): the bold holds "rote", it is not emptied
    tree = Element(first=0, last=3, children=[Element(start="<b>", end="</b>", first=1, last=2)])
    alignment = [(0, 0), (0, 1), (1, 1), (2, 1), (2, 2)]
    assert transfer(tree, "Das rote Auto", alignment) == "Das <b>rote</b> Auto"
