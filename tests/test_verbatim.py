"""Spans copied as written: listed terms, URLs, e-mail addresses, emoji, markup sent as text, unreadable runs."""

from hypothesis import given
from hypothesis import strategies as st

from tnmt.decode.verbatim import find_verbatim, notranslate_element


def kept(text: str, terms=(), readable=None) -> list[str]:
    return [text[a:b] for a, b in find_verbatim(text, terms, readable=readable)]


def test_what_a_model_cannot_read_is_found():
    assert kept("🐶🐶 🚲") == ["🐶🐶", "🚲"]
    assert kept("The 👩‍👩‍👧 family 👍🏽!") == ["👩‍👩‍👧", "👍🏽"]
    assert kept("Mail a.b@c.org or see https://x.org/a?b=1.") == ["a.b@c.org", "https://x.org/a?b=1"]
    assert kept("(see www.x.org/a), then") == ["www.x.org/a"]
    assert kept("Tom &amp; Jerry &lt;3 a &#x1F436; dog.") == ["&amp;", "&lt;", "&#x1F436;"]
    assert kept('<p>The <b class="x">red</b> car</p>') == ["<p>", '<b class="x">', "</b>", "</p>"]
    assert kept("3 < 4 and a<b") == []  # a lone "<" is no tag


def test_listed_terms_are_whole_words_and_case_sensitive():
    assert kept("Apple sells apples, apple", ["Apple"]) == ["Apple"]
    assert kept("I met New  York's mayor", ["New York"]) == ["New  York"]


def test_unreadable_runs_merge_with_what_they_touch():
    readable = str.isascii
    assert kept("ein Grüßchen für dich", readable=readable) == ["üß", "ü"]
    assert kept("go to https://ü.org now", readable=readable) == ["https://ü.org"]


def test_notranslate_elements():
    assert notranslate_element("span", [("translate", "No")])
    assert notranslate_element("code", [("class", "x notranslate")])
    assert not notranslate_element("span", [("translate", "yes"), ("class", "notranslated")])


@given(st.lists(st.sampled_from([*"ab .:/@<>&;#x🐶\u200d👩", "https://", "www."]), max_size=20).map("".join))
def test_spans_are_sorted_disjoint_and_inside_the_text(text):
    spans = find_verbatim(text, ["ab"], readable=lambda c: c != "#")
    assert all(0 <= a < b <= len(text) for a, b in spans)
    assert all(b1 < a2 for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False))
