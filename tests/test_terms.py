import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tnmt.errors import UserError
from tnmt.translate.terms import clean_term, find_terms, fold_term, is_word_char, read_list


def found(text: str, *terms: str, casefold: bool = True) -> list[str]:
    return [text[start:end] for start, end, _ in find_terms(text, terms, casefold=casefold)]


def test_a_term_matches_whole_words_only():
    assert found("A dog.", "dog") == ["dog"]
    assert found("hotdog dogs dogged underdog_ dog2 2dog", "dog") == []
    assert found("13 3 km", "3") == ["3"]
    assert found("kafe\u0301 cafe\u0301", "cafe") == []  # the accent (a combining mark) continues the word
    assert found("कमी कम", "कम") == ["कम"]  # Hindi: a vowel sign is a mark, so "कमी" is another word
    assert found("می\u200cخواهم", "می") == []  # Persian: the zero-width non-joiner is inside the word


def test_punctuation_apostrophes_and_hyphens_are_boundaries():
    text = "dog, (dog) «dog» dog's dog’s dog-friendly “dog”"
    assert found(text, "dog") == ["dog"] * 7
    assert found("I like C++. ASP.NET too", "C++", ".NET") == ["C++", ".NET"]  # no boundary at punctuation
    assert found("C++x", "C++") == ["C++"]


def test_case_is_folded_only_when_asked():
    assert found("Dog DOG dOg", "dog") == ["Dog", "DOG", "dOg"]
    assert found("Dog DOG dog", "dog", casefold=False) == ["dog"]
    # Full case folding: "ß" is "ss"; the offsets cover the text as written.
    assert found("Die STRASSE, die Straße und die strasse.", "Straße") == ["STRASSE", "Straße", "strasse"]
    assert find_terms("Die Straße.", ["strasse"], casefold=True) == [(4, 10, 0)]
    assert found("Die Straße.", "strass") == []  # never a match that ends inside "ß"


def test_canonically_equivalent_spellings_match():
    composed, decomposed = "café", unicodedata.normalize("NFD", "café")
    assert found(f"un {decomposed} noir", composed) == [decomposed]
    assert found(f"un {composed} noir", decomposed) == [composed]
    assert found("Ärger ÄRGER", unicodedata.normalize("NFD", "ärger")) == ["Ärger", "ÄRGER"]


def test_a_space_in_a_term_matches_any_whitespace_run():
    text = "a fire truck, a fire\n  truck, a fire\ttruck, a firetruck"
    assert found(text, "fire truck") == ["fire truck", "fire\n  truck", "fire\ttruck"]
    assert found(text, "  fire   truck ") == found(text, "fire truck")  # the term's own spacing is normalised
    assert found("fire\u00a0truck", "fire truck") == ["fire\u00a0truck"]  # no-break space too


def test_every_occurrence_is_reported_overlapping_ones_included():
    text = "new york city"
    assert find_terms(text, ["york city", "new york", "new york city", "york"], casefold=True) == [
        (0, 8, 1),
        (0, 13, 2),
        (4, 8, 3),
        (4, 13, 0),
    ]
    # Terms with one folded form: the first is named. An empty term matches nothing.
    assert find_terms("Dog", ["", "DOG", "dog"], casefold=True) == [(0, 3, 1)]
    assert find_terms("", ["dog"], casefold=True) == []


def test_fold_term_and_word_characters():
    assert fold_term("  Fire\n TRUCK ", casefold=True) == "fire truck"
    assert fold_term("Straße", casefold=True) == "strasse"
    assert fold_term("Straße", casefold=False) == "Straße"
    assert [is_word_char(ch) for ch in "aß1_\u0301\u200d -'.🐶"] == [True] * 6 + [False] * 5


WORDS = st.lists(st.sampled_from(["a", "b", "ab", "A", "-"]), min_size=1, max_size=3).map(" ".join)


@given(st.text(st.sampled_from("aAbB -\n."), max_size=14), st.lists(WORDS, min_size=1, max_size=4))
def test_find_terms_equals_a_brute_force_search(text, terms):
    """On ASCII, every (start, end) whose substring folds to a term and respects the boundaries, and no other."""

    def boundary_ok(start: int, end: int, key: str) -> bool:
        before = key[0].isalnum() and start > 0 and text[start - 1].isalnum()
        after = key[-1].isalnum() and end < len(text) and text[end].isalnum()
        return not before and not after

    keys = [" ".join(term.lower().split()) for term in terms]
    expected = set()
    for start in range(len(text)):
        for end in range(start + 1, len(text) + 1):
            piece = text[start:end]
            if piece.strip() == piece and " ".join(piece.lower().split()) in keys:
                key = " ".join(piece.lower().split())
                if boundary_ok(start, end, key):
                    expected.add((start, end, keys.index(key)))
    assert set(find_terms(text, terms, casefold=True)) == expected


def test_read_list_skips_blank_lines_and_comments_and_names_bad_files(tmp_path):
    path = tmp_path / "list.txt"
    path.write_bytes("\ufeffone\r\n\n   \n# a comment\n  # another\ntwo # not a comment\n".encode())
    assert read_list(path) == [(1, "one"), (6, "two # not a comment")]
    with pytest.raises(UserError, match=f"^{tmp_path / 'missing.txt'}: no such file$"):
        read_list(tmp_path / "missing.txt")
    with pytest.raises(UserError, match=f"^{tmp_path}: is a directory, expected a file$"):
        read_list(tmp_path)
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(UserError, match=f"^{path}:2: invalid UTF-8$"):
        read_list(path)


def test_clean_term_normalises_whitespace_and_refuses_blank_or_split_terms():
    assert clean_term("  fire \u00a0  truck ", what="term", where="x") == "fire truck"
    for bad, message in [
        ("", "x: empty term"),
        (" \u00a0 ", "x: empty term"),
        ("a\tb", "x: term 'a\\tb' contains a tab or line break"),
        ("a\nb", "x: term 'a\\nb' contains a tab or line break"),
        ("a\u2028b", "x: term 'a\\u2028b' contains a tab or line break"),
        (3, "x: term must be a string, got int"),
    ]:
        with pytest.raises(UserError) as err:
            clean_term(bad, what="term", where="x")
        assert str(err.value) == message
