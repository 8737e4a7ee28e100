import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tnmt.errors import UserError
from tnmt.translate.glossary import (
    GlossaryEntry,
    TermMatch,
    build_glossary,
    glossary_entry,
    load_glossary,
    match_glossary,
)
from tnmt.translate.terms import fold_term


def entry(source: str, targets: str = "x") -> GlossaryEntry:
    return glossary_entry(source, targets, where="test")


def matched(text: str, *entries: GlossaryEntry) -> list[tuple[str, str]]:
    """(text matched, the entry's source term) for each match."""
    return [(text[m.start : m.end], m.entry.source) for m in match_glossary(text, entries)]


def test_glossary_entry_normalises_terms_and_splits_a_target_string_on_bars():
    assert glossary_entry("  fire \u00a0 truck ", " Feuerwehrauto ", where="x") == GlossaryEntry(
        "fire truck", ("Feuerwehrauto",)
    )
    assert glossary_entry("dog", "Hund | Hunde|Hund", where="x").targets == ("Hund", "Hunde")  # a repeat kept once
    assert glossary_entry("or", ["A | B", "C"], where="x").targets == ("A | B", "C")  # a list's forms are not split


@pytest.mark.parametrize(
    ("source", "targets", "message"),
    [
        ("", "Hund", "glossary[2]: empty source term"),
        ("  ", "Hund", "glossary[2]: empty source term"),
        ("dog", " ", "glossary[2]: empty target form"),
        ("dog", "Hund | ", "glossary[2]: empty target form"),
        ("dog", [], "glossary[2]: no target form"),
        ("dog", ["Hund", ""], "glossary[2]: empty target form"),
        ("dog\nfood", "Hundefutter", "glossary[2]: source term 'dog\\nfood' contains a tab or line break"),
        ("dog", "Hund\tHunde", "glossary[2]: target form 'Hund\\tHunde' contains a tab or line break"),
        ("dog", 3, "glossary[2]: target must be a string or a list of strings, got int"),
        (None, "Hund", "glossary[2]: source term must be a string, got NoneType"),
    ],
)
def test_glossary_entry_refuses_blank_or_broken_terms_naming_where(source, targets, message):
    with pytest.raises(UserError) as err:
        glossary_entry(source, targets, where="glossary[2]")
    assert str(err.value) == message


def test_an_entry_built_by_hand_must_be_normalised():
    assert GlossaryEntry("hot dog", ("Hotdog",)).targets == ("Hotdog",)
    for source, targets in [(" dog", ("Hund",)), ("dog", ()), ("dog", ["Hund"]), ("dog", ("Hund  Hunde",))]:
        with pytest.raises(ValueError, match="is not normalised: use glossary_entry"):
            GlossaryEntry(source, targets)


def test_build_glossary_names_items_by_index_and_refuses_conflicting_entries():
    assert build_glossary([("dog", "Hund"), ("cat", ["Katze"])]) == [entry("dog", "Hund"), entry("cat", "Katze")]
    with pytest.raises(UserError, match=r"^glossary\[1\]: empty target form$"):
        build_glossary([("dog", "Hund"), ("cat", "")])
    with pytest.raises(UserError) as err:
        build_glossary([("dog", "Hund"), ("cat", "Katze"), ("DOG", "Köter")], where="terms")
    assert str(err.value) == (
        "terms[2]: 'DOG' -> 'Köter' conflicts with terms[0]: 'dog' -> 'Hund' (case is ignored); give each term"
        " once, with all its target forms ('A | B')"
    )


def test_the_same_entry_twice_is_kept_once():
    merged = build_glossary([("dog", "Hund | Hunde"), ("cat", "Katze"), ("Dog", ["Hunde", "Hund"])])
    assert merged == [entry("dog", "Hund | Hunde"), entry("cat", "Katze")]


def test_load_glossary_reads_tsv_skipping_blank_lines_and_comments(tmp_path):
    path = tmp_path / "terms.tsv"
    path.write_text("# source\ttarget\n\ndog\tHund | Hunde\n fire truck \tFeuerwehrauto\r\n", encoding="utf-8")
    assert load_glossary(path) == [entry("dog", "Hund | Hunde"), entry("fire truck", "Feuerwehrauto")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("dog\tHund\ncat Katze\n", ":2: expected 'source<TAB>target', got 'cat Katze'"),
        ("dog\tHund\tHunde\n", ":1: expected 'source<TAB>target', got 'dog\\tHund\\tHunde'"),
        ("\tHund\n", ":1: empty source term"),
        ("dog\t|Hund\n", ":1: empty target form"),
        (
            "dog\tHund\n\n# more\nDog\tKöter\n",
            ":4: 'Dog' -> 'Köter' conflicts with {path}:1: 'dog' -> 'Hund' (case is ignored); give each term"
            " once, with all its target forms ('A | B')",
        ),
    ],
)
def test_load_glossary_errors_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "terms.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_glossary(path)
    assert str(err.value) == f"{path}{message.format(path=path)}"


def test_load_glossary_names_a_missing_empty_binary_file_or_a_directory(tmp_path):
    path = tmp_path / "terms.tsv"
    cases = [(path, f"{path}: no such file"), (tmp_path, f"{tmp_path}: is a directory, expected a file")]
    for target, message in cases:
        with pytest.raises(UserError) as err:
            load_glossary(target)
        assert str(err.value) == message
    for content, message in [(b"", f"{path}: empty file"), (b"dog\tHund\n\xe4\tx\n", f"{path}:2: invalid UTF-8")]:
        path.write_bytes(content)
        with pytest.raises(UserError) as err:
            load_glossary(path)
        assert str(err.value) == message


def test_match_glossary_finds_exact_terms_at_word_boundaries_ignoring_case():
    dog = entry("dog", "Hund")
    assert matched("A dog. Dog, (dog) DOG's", dog) == [("dog", "dog"), ("Dog", "dog"), ("dog", "dog"), ("DOG", "dog")]
    assert matched("hotdog dogs dogged", dog) == []  # not inside a word, and no plural
    text = "a fire\n truck and a fire   truck"
    assert matched(text, entry("fire truck")) == [("fire\n truck", "fire truck"), ("fire   truck", "fire truck")]
    assert matched("Die STRASSE und die Straße", entry("straße")) == [("STRASSE", "straße"), ("Straße", "straße")]
    assert matched("Москва и москва", entry("Москва")) == [("Москва", "Москва"), ("москва", "Москва")]


def test_the_longest_term_wins_then_the_leftmost_and_matches_never_overlap():
    dog, hot_dog, stand = entry("dog"), entry("hot dog"), entry("dog stand")
    assert matched("a hot dog", dog, hot_dog) == [("hot dog", "hot dog")]
    assert matched("a hot dog", hot_dog, dog) == [("hot dog", "hot dog")]  # not the list's order
    # "dog stand" (9) beats "hot dog" (7) wherever they overlap; "hot" alone is no entry.
    assert matched("hot dog stand", hot_dog, stand, dog) == [("dog stand", "dog stand")]
    # Equal lengths: the leftmost wins, and the other is dropped, not cut.
    assert matched("a b c", entry("a b"), entry("b c")) == [("a b", "a b")]
    # A shorter term still fills what the longest left free.
    assert matched("a b c d", entry("a b"), entry("a"), entry("b c d")) == [("a", "a"), ("b c d", "b c d")]


def test_matches_are_sorted_by_start_and_name_the_first_of_entries_with_one_form():
    first, second = GlossaryEntry("Dog", ("Hund",)), GlossaryEntry("dog", ("Köter",))
    result = match_glossary("dog, cat and dog", [entry("cat"), first, second])
    assert [(m.start, m.end, m.entry) for m in result] == [(0, 3, first), (5, 8, entry("cat")), (13, 16, first)]
    assert match_glossary("", [first]) == [] and match_glossary("dog", []) == []


def test_a_thousand_entries_match_a_thousand_characters_in_well_under_10_ms():
    rng = random.Random(0)
    words = ["".join(rng.choices("abcdefghij", k=rng.randint(2, 7))) for _ in range(3000)]
    sources = list(dict.fromkeys(" ".join(rng.sample(words, rng.randint(1, 3))) for _ in range(1100)))[:1000]
    entries = build_glossary((source, "x") for source in sources)
    text = " ".join(rng.choices(words[:300] + sources[:50], k=400))[:1000]
    assert len(entries) == 1000 and len(text) == 1000 and match_glossary(text, entries)
    times = []
    for _ in range(5):
        begin = time.perf_counter()
        match_glossary(text, entries)
        times.append(time.perf_counter() - begin)
    assert min(times) < 0.010, times


TERMS = st.lists(st.sampled_from(["a", "b", "ab", "A", "ß", "ss", "-", "x.y"]), min_size=1, max_size=3).map(" ".join)


@given(st.text(st.sampled_from("aAbBsSßx. -\n"), max_size=30), st.lists(TERMS, min_size=1, max_size=5, unique=True))
def test_matches_are_sorted_disjoint_and_each_is_its_term_ignoring_case(text, sources):
    entries = list({fold_term(s, casefold=True): entry(s) for s in sources}.values())
    result = match_glossary(text, entries)
    assert all(isinstance(m, TermMatch) and 0 <= m.start < m.end <= len(text) for m in result)
    assert all(a.end <= b.start for a, b in zip(result, result[1:], strict=False))
    for m in result:
        assert fold_term(text[m.start : m.end], casefold=True) == fold_term(m.entry.source, casefold=True)
