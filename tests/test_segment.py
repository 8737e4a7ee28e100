"""translate/segment.py: lines kept, sentences split by language, long sentences cut at safe points."""

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tnmt.translate.segment import _CLAUSE, Layout, _cut, split_text

HARD_CASES = [
    (
        "en",
        "Dr. Smith arrived at 3.5 p.m. yesterday. He left early.",
        ["Dr. Smith arrived at 3.5 p.m. yesterday.", "He left early."],
    ),
    ("en", 'He said "Go!" Then he left.', ['He said "Go!"', "Then he left."]),
    ("en", "Wait... What happened?", ["Wait...", "What happened?"]),
    ("en", "J. R. R. Tolkien wrote it. Read it.", ["J. R. R. Tolkien wrote it.", "Read it."]),
    ("en", "Write to anna@example.org today. Thanks!", ["Write to anna@example.org today.", "Thanks!"]),
    ("en", "We won! 🎉 See you", ["We won!", "🎉 See you"]),
    ("en", "no final punctuation here", ["no final punctuation here"]),
    (
        "en",
        "See https://example.org/a.html for more. It helps.",
        ["See https://example.org/a.html for more.", "It helps."],
    ),
    ("de", "Er kam z. B. um 10.30 Uhr. Dann ging er.", ["Er kam z. B. um 10.30 Uhr.", "Dann ging er."]),
    ("de", "Dr. Müller kommt am 3. Mai. Wir warten.", ["Dr. Müller kommt am 3. Mai.", "Wir warten."]),
    ("de", "Der Preis ist 3,5 Euro. Das ist viel.", ["Der Preis ist 3,5 Euro.", "Das ist viel."]),
    ("fr", "M. Dupont est arrivé. Il pleut.", ["M. Dupont est arrivé.", "Il pleut."]),
    ("fr", "Le Dr. Martin parle. Mme Durand écoute.", ["Le Dr. Martin parle.", "Mme Durand écoute."]),
    ("cs", "Přišel např. pan Novák. Pak odešel.", ["Přišel např. pan Novák.", "Pak odešel."]),
    ("cs", "Je to tzv. dům. Stojí tam.", ["Je to tzv. dům.", "Stojí tam."]),
]


@pytest.mark.parametrize(("language", "text", "sentences"), HARD_CASES)
def test_sentences_of_hard_cases(language, text, sentences):
    assert split_text(text, language).segments == sentences


def test_lines_markers_and_whitespace_lie_between_segments():
    text = "Dear Anna,\n\n  - first item here\n\t1. numbered one.   Two.\r\n• bullet\n   \nend  "
    layout = split_text(text, "en")
    assert layout.segments == ["Dear Anna,", "first item here", "numbered one.", "Two.", "bullet", "end"]
    assert layout.gaps() == ["", "\n\n  - ", "\n\t1. ", "   ", "\r\n• ", "\n   \n", "  "]
    assert layout.join([s.upper() for s in layout.segments]) == text.upper()
    assert layout.sentence == (0, 1, 2, 3, 4, 5) and layout.parts == [1] * 6


def test_a_blank_text_has_no_segment_and_comes_back_as_it_was():
    for text in ("", "   ", "\n\n\n", "\t \r\n"):
        layout = split_text(text, "en")
        assert layout.spans == () and layout.join([]) == text


def test_a_long_sentence_is_cut_at_clause_punctuation_near_its_middle():
    text = "A man in a red shirt rides a bike, while two dogs play in the snow near the old house"
    layout = split_text(text, "en", fits=lambda s: len(s.split()) <= 11)
    assert layout.segments == [
        "A man in a red shirt rides a bike,",
        "while two dogs play in the snow near the old house",
    ]
    assert layout.sentence == (0, 0) and layout.parts == [2]


def test_a_long_sentence_without_punctuation_is_cut_at_spaces_until_each_part_fits():
    text = " ".join(f"w{i}" for i in range(100))
    layout = split_text(text, "en", fits=lambda s: len(s.split()) <= 7)
    assert all(len(s.split()) <= 7 for s in layout.segments)
    assert " ".join(layout.segments) == text and layout.parts == [len(layout.spans)]


def _cut_by_walking(text: str, start: int, end: int) -> int | None:
    """`_cut`'s rule walked over every candidate: the clause end nearest the middle (within a quarter of the span
    from it, not at either end), else the inner space nearest it; the left one of two as near."""
    middle, quarter = (start + end) / 2, (end - start) / 4
    clauses = [m.end() for m in _CLAUSE.finditer(text, start, end) if start < m.end() < end - 1]
    near = [c for c in clauses if abs(c - middle) <= quarter]
    if near:
        return min(near, key=lambda c: abs(c - middle))
    inner = [start + m.start() for m in re.finditer(r"\s+", text[start:end]) if m.start() > 0]
    return min(inner, key=lambda c: abs(c - middle)) if inner else None


def test_the_cut_searched_out_from_the_middle_is_the_walked_one():
    """The cut is found searching out from the middle (linear in the halving of a long sentence): the same place
    as walking every candidate, on random spans with clause marks, dashes and long runs on either side."""
    rng = random.Random(0)
    pieces = ["a", "b", " ", "  ", ",", ";", " —", " -", "-", "—", ":", "\t", "x" * 30, " " * 70, "a" * 100]
    for _ in range(3000):
        text = "q" + "".join(rng.choice(pieces) for _ in range(rng.randint(1, 60))) + "q"
        start, end = 0, len(text)
        assert _cut(text, start, end) == _cut_by_walking(text, start, end), text


def test_one_unbroken_word_is_left_whole():
    layout = split_text("x" * 5000, "en", fits=lambda s: len(s) < 100)
    assert layout.segments == ["x" * 5000]


LINE = st.text(alphabet=st.sampled_from("ab. ,!?\t-•1)"), max_size=30)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(LINE, max_size=8), ending=st.sampled_from(["\n", "\r\n"]))
def test_property_lines_blanks_and_characters_survive(lines, ending):
    text = ending.join(lines)
    layout = split_text(text, "en", fits=lambda s: len(s) <= 12)
    assert layout.join(layout.segments) == text  # nothing lost, nothing moved
    marked = layout.join(["X"] * len(layout.spans))
    assert marked.count("\n") == text.count("\n")  # the same lines
    for line, out in zip(text.split("\n"), marked.split("\n"), strict=True):
        assert (not line.strip()) == (not out.strip())  # blank where the source's was
    for start, end in layout.spans:  # segments start and end at whitespace, never empty or blank
        assert text[start:end].strip() == text[start:end] != ""
        assert start == 0 or text[start - 1].isspace() or not re.search(r"\S", text[:start])
        assert "\n" not in text[start:end] and "\r" not in text[start:end]


def test_layout_join_checks_the_number_of_translations():
    layout = Layout("a. b.", ((0, 2), (3, 5)), (0, 1))
    with pytest.raises(ValueError):
        layout.join(["x"])
