"""Glossary entries: checked, read from TSV with errors naming file and line, and matched in text by the rules of
decode/glossary.py."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tnmt.decode.glossary import GlossaryEntry, glossary_entry, load_glossary, load_terms, match_glossary
from tnmt.errors import UserError


def matched(text: str, *entries: tuple[str, str]) -> list[tuple[str, str]]:
    found = match_glossary(text, [glossary_entry(s, t, where="test") for s, t in entries])
    return [(text[m.start : m.end], m.entry.source) for m in found]


def test_entries_split_forms_and_normalise_whitespace():
    assert glossary_entry(
        "  fire \t".replace("\t", " ") + " truck", "Feuerwehrauto | Löschfahrzeug|Feuerwehrauto", where="x"
    ) == (GlossaryEntry("fire truck", ("Feuerwehrauto", "Löschfahrzeug")))
    assert glossary_entry("dog", ["Hund", " Hunde "], where="x").targets == ("Hund", "Hunde")
    for source, target, message in [
        (" ", "Hund", "x: source term: an empty term"),
        ("dog", "Hund | ", "x: target term: an empty term"),
        ("a\tb", "c", "a tab or a line break"),
    ]:
        with pytest.raises(UserError, match=message):
            glossary_entry(source, target, where="x")


def test_terms_match_whole_words_case_insensitively_across_whitespace():
    assert matched("A Dog, a dog's ball (DOG).", ("dog", "Hund")) == [("Dog", "dog"), ("dog", "dog"), ("DOG", "dog")]
    assert matched("hotdogs and dogs", ("dog", "Hund")) == []  # a glossary names the forms it means
    assert matched("the fire\n  truck", ("fire truck", "Feuerwehrauto")) == [("fire\n  truck", "fire truck")]
    assert matched("die Straße.", ("Straße", "street")) == [("Straße", "Straße")]


def test_the_longest_match_wins_then_the_leftmost():
    entries = [("fire", "Feuer"), ("fire truck", "Feuerwehrauto"), ("truck driver seat", "Fahrersitz")]
    assert matched("the fire truck", *entries) == [("fire truck", "fire truck")]
    assert matched("a fire truck driver seat", *entries) == [
        ("fire", "fire"),
        ("truck driver seat", "truck driver seat"),
    ]


def test_files_are_read_with_errors_naming_file_and_line(tmp_path):
    path = tmp_path / "terms.tsv"
    path.write_text("# comment\n\ndog\tHund | Hunde\nfire truck\tFeuerwehrauto\n", encoding="utf-8")
    assert load_glossary(path) == [
        GlossaryEntry("dog", ("Hund", "Hunde")),
        GlossaryEntry("fire truck", ("Feuerwehrauto",)),
    ]
    path.write_text("dog\tHund\ncat Katze\n")
    with pytest.raises(UserError, match=rf"{path}:2: expected 'source<TAB>target', got 'cat Katze'"):
        load_glossary(path)
    path.write_text("dog\tHund\nDog\tHunde\n")
    with pytest.raises(UserError, match=rf"{path}:2: 'Dog' is already on line 1"):
        load_glossary(path)
    path.write_bytes(b"dog\tHund\n" + b"cat\t\xff\n")
    with pytest.raises(UserError, match=rf"{path}:2: not UTF-8"):
        load_glossary(path)
    with pytest.raises(UserError, match=rf"{tmp_path}: is a directory"):
        load_glossary(tmp_path)
    with pytest.raises(UserError, match="cannot read"):
        load_terms(tmp_path / "missing.txt")
    words = tmp_path / "keep.txt"
    words.write_text("Jonas\n\n# names\nNew  York\n")
    assert load_terms(words) == ["Jonas", "New York"]


WORDS = st.sampled_from(["dog", "Dog", "fire", "truck", "fire truck", "a", "the", "hot", "dogs", ",", "."])


@given(
    st.lists(WORDS, max_size=12),
    st.lists(st.sampled_from(["dog", "fire", "fire truck", "truck", "hot dog"]), min_size=1),
)
def test_matches_are_sorted_disjoint_and_spell_their_terms(words, sources):
    text = " ".join(words)
    found = match_glossary(text, [glossary_entry(s, "X", where="t") for s in sources])
    assert all(a.end <= b.start for a, b in zip(found, found[1:], strict=False))
    for m in found:
        assert " ".join(text[m.start : m.end].split()).casefold() == m.entry.source.casefold()
