import html
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tnmt.errors import UserError
from tnmt.translate.kept import find_kept, load_terms, notranslate_element


def kept(text: str, *terms: str, readable=None) -> list[str]:
    return [text[start:end] for start, end in find_kept(text, terms, readable=readable)]


def test_terms_are_kept_case_sensitively_as_whole_words():
    text = "Apple sells apples; an apple a day. Eat at Big  Apple's."
    assert kept(text, "Apple") == ["Apple", "Apple"]
    assert kept(text, "apple") == ["apple"]  # not "apples"
    assert kept("a New\nYork bagel", "New York") == ["New\nYork"]


def test_emoji_runs_are_found_with_their_joiners_modifiers_and_flags():
    assert find_kept("🐶🐶 🚲", []) == [(0, 2), (3, 4)]  # touching emoji merge, a space separates
    assert find_kept("The 👩‍👩‍👧 family", []) == [(4, 9)]  # three people joined by two ZWJs: one span
    text = html.unescape("Tom &amp; Jerry <3 a 🐶 dog.")
    assert text == "Tom & Jerry <3 a 🐶 dog." and kept(text) == ["🐶"]
    assert kept("ok 👍🏽 🇩🇪 1️⃣ 🏳️‍🌈 ❤️‍🔥 ☀ 🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f!") == [
        "👍🏽",
        "🇩🇪",
        "1️⃣",
        "🏳️‍🌈",
        "❤️‍🔥",
        "☀",
        "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    ]
    assert kept("© 2024 Foo™, 1 + 1, #1, a\u200db") == []  # text symbols, and a ZWJ between letters
    assert kept("©\ufe0f 2024") == ["©\ufe0f"]  # the emoji presentation of ©


def test_urls_and_email_addresses_are_found_without_the_sentence_punctuation_after_them():
    assert kept("Mail me at a.b@c.org or see https://x.org/a?b=1.") == ["a.b@c.org", "https://x.org/a?b=1"]
    assert kept("(see https://x.org/a), or HTTP://X.ORG!") == ["https://x.org/a", "HTTP://X.ORG"]
    assert kept("https://en.wikipedia.org/wiki/Foo_(bar).") == ["https://en.wikipedia.org/wiki/Foo_(bar)"]
    assert kept('"https://x.org/a?q=1&r=2", <https://x.org/b>') == ["https://x.org/a?q=1&r=2", "https://x.org/b"]
    assert kept("详见https://x.org/中文。访问www.x.cn谢谢") == [
        "https://x.org/中文",
        "www.x.cn谢谢",
    ]  # IRIs have letters
    assert kept("xhttps://x.org, awww.x.org") == []
    assert kept("Go to www.x.org/path; not www.example. or https:// or http://.") == ["www.x.org/path"]
    assert kept("http://localhost:8080/api…") == ["http://localhost:8080/api"]
    assert kept("Write to o'brien+tag@mail.example.co.uk.") == ["o'brien+tag@mail.example.co.uk"]
    assert kept("https://user@x.org/a") == ["https://user@x.org/a"]  # the e-mail-like part merges into the URL


def test_unreadable_runs_with_their_marks_whitespace_never():
    calls = []

    def latin(ch: str) -> bool:
        calls.append(ch)
        return ch.isascii()

    assert kept("Hello 你好 世界 and ё\u0301 e\u0301!", readable=latin) == ["你好", "世界", "ё\u0301", "\u0301"]
    assert sorted(calls) == sorted(set("Hello你好世界andё\u0301e!"))  # once per distinct character, no space
    assert kept("你好", readable=latin) == ["你好"]
    assert kept("a 🐶", readable=lambda ch: False) == ["a", "🐶"]


def test_spans_that_overlap_or_touch_merge():
    assert kept("Visit ACME🐶https://acme.com now", "ACME") == ["ACME🐶https://acme.com"]
    assert kept("ACME Corp", "ACME", "ACME Corp", "Corp") == ["ACME Corp"]


def test_load_terms_keeps_each_term_once_and_names_bad_lines(tmp_path):
    path = tmp_path / "keep.txt"
    path.write_text("# brands\nApple\n\n  Big   Apple \nApple\niPhone\n", encoding="utf-8")
    assert load_terms(path) == ["Apple", "Big Apple", "iPhone"]
    path.write_text("Apple\nApple\tApfel\n", encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_terms(path)
    assert str(err.value) == f"{path}:2: term 'Apple\\tApfel' contains a tab or line break"
    for target, message in [(tmp_path / "no.txt", "no such file"), (tmp_path, "is a directory, expected a file")]:
        with pytest.raises(UserError) as err:
            load_terms(target)
        assert str(err.value) == f"{target}: {message}"
    path.write_bytes(b"\xff")
    with pytest.raises(UserError, match=f"^{path}:1: invalid UTF-8$"):
        load_terms(path)


@pytest.mark.parametrize(
    ("tag", "attrs", "expected"),
    [
        ("span", [("translate", "no")], True),
        ("div", [("translate", " NO ")], True),
        ("p", [("class", "intro notranslate")], True),
        ("span", [("CLASS", "notranslate")], True),
        ("span", [("class", "notranslated NoTranslate")], False),  # class names are case-sensitive in HTML
        ("span", [("translate", "yes")], False),
        ("span", [("translate", "maybe")], False),  # invalid: inherited from the parent, the caller's state
        ("span", [], False),
        ("code", [], True),
        ("KBD", [("id", "k")], True),
        ("code", [("translate", "yes")], False),
        ("code", [("translate", None)], False),  # a bare attribute is "yes"
        ("code", [("translate", "yes"), ("class", "notranslate")], True),  # any "no" wins
        ("pre", [], False),  # preformatted prose (poems) stays translatable
    ],
)
def test_notranslate_element(tag, attrs, expected):
    assert notranslate_element(tag, attrs) is expected


ALPHABET = st.sampled_from(
    ["a", "A", " ", ".", "🐶", "\u200d", "\ufe0f", "🏽", "@", "https://", "www.", "x.y", "(", ")"]
)


@given(st.lists(ALPHABET, max_size=20).map("".join), st.lists(st.sampled_from(["a", "A a", "x.y", "🐶"]), max_size=3))
def test_spans_are_sorted_disjoint_nonempty_and_within_the_text(text, terms):
    spans = find_kept(text, terms, readable=lambda ch: ch != "A")
    assert all(0 <= start < end <= len(text) for start, end in spans)
    assert all(end < next_start for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False))
    assert all(not text[start].isspace() and not text[end - 1].isspace() for start, end in spans)


def test_markup_sent_as_text_is_kept():
    spans = find_kept('<p>The <b class="x">red</b> car &amp; Tom &#x1F436;</p> 3 < 4', [])
    text = '<p>The <b class="x">red</b> car &amp; Tom &#x1F436;</p> 3 < 4'
    assert [text[a:b] for a, b in spans] == ["<p>", '<b class="x">', "</b>", "&amp;", "&#x1F436;</p>"]


# the patterns find_kept ran before they were made linear (issue 79): what the linear passes must still find
QUADRATIC_EMAIL = re.compile(r"\w[\w.%+'-]*@[\w-]+(?:\.[\w-]+)+")
QUADRATIC_MARKUP = re.compile(
    r"<!--.*?-->|</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>|&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);", re.DOTALL
)
PIECES = st.sampled_from(
    ["a", "é", "_", ".", "+", "'", "-", "%", "@", " ", "b.c", "<", ">", "!--", "-->", "&", "#1", ";", "/", "p"]
)


@given(st.lists(PIECES, max_size=24).map("".join))
def test_the_linear_passes_find_what_the_patterns_found(text):
    from tnmt.translate.kept import _emails, _markup

    assert _emails(text) == [m.span() for m in QUADRATIC_EMAIL.finditer(text)]
    assert _markup(text) == [m.span() for m in QUADRATIC_MARKUP.finditer(text)]


@given(st.lists(st.sampled_from(["a", "(", ")", "[", "]", "}", ".", "!", "'"]), max_size=12).map("".join))
def test_a_urls_trailing_punctuation_goes_as_it_went(tail):
    from tnmt.translate.kept import _urls

    url = "https://x.org/" + tail
    expected = url  # the rule as first written: strip one character at a time, counting the brackets each time
    while expected and expected[-1] in ".,;:!?'…)]}*":
        opener = {")": "(", "]": "[", "}": "{"}.get(expected[-1])
        if opener and expected.count(opener) >= expected.count(expected[-1]):
            break
        expected = expected[:-1]
    assert _urls(url + " z") == [(0, len(expected))]
