"""Listed terms found in text as a translator's user means them: whole words, whitespace and accents as typed.

Glossaries (`glossary.py`) and do-not-translate lists (`kept.py`) find their terms here, so both follow
one set of rules:

- A term matches at word boundaries: a term that starts (ends) with a word character does not match right
  after (before) one. Word characters are letters, digits, "_", combining marks and the zero-width
  (non-)joiner, in every script, so "dog" is not found in "hotdog", "dogs" or "dog" + U+0301, nor Hindi
  "कम" in "कमी" (its vowel sign is a mark). Punctuation, apostrophes and hyphens are boundaries: "dog" is
  found in "dog,", "(dog)", "dog's" and "dog-friendly". A term that starts or ends with punctuation ("C++",
  ".NET") has no boundary to respect on that side.
- A space in a term matches any run of whitespace, line breaks included ("fire truck" in "fire\\n  truck").
- Canonically equivalent spellings match (both sides are compared in NFD: "é" as one character or as "e"
  and U+0301); with `casefold`, case is ignored as Unicode full case folding does it: "STRASSE" matches
  "Straße", and the match's offsets cover "Straße" as written (a match never ends inside a character).

The search walks a character trie from each position of the text, so it costs in proportion to the text and
the matches' lengths, not to the number of terms; a list's trie is built once and cached.
"""

import os
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from tnmt.data.corpus import iter_lines
from tnmt.errors import UserError

_JOINERS = frozenset("\u200c\u200d")  # inside Persian and Indic words
_BREAKS = frozenset("\t\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029")  # a tab and what str.splitlines splits on
_END = ""  # the trie key of "a term ends here" (every other key is one character)
_WHITESPACE = " "  # the trie key of a whitespace run


def is_word_char(ch: str) -> bool:
    """Whether `ch` continues a word: a letter, digit, "_", combining mark or zero-width (non-)joiner."""
    return ch.isalnum() or ch == "_" or ch in _JOINERS or unicodedata.category(ch)[0] == "M"


def fold_term(term: str, *, casefold: bool) -> str:
    """The form in which `term` is compared: whitespace runs as one space, NFD, case folded with `casefold`.
    Two terms with the same form find the same occurrences."""
    return "".join(_fold(ch, casefold) for ch in " ".join(term.split()))


def find_terms(text: str, terms: Sequence[str], *, casefold: bool) -> list[tuple[int, int, int]]:
    """Every occurrence of `terms` in `text`, by the rules of the module docstring.

    Returns:
        (start, end, i): `text[start:end]` is `terms[i]`, sorted by start, then end. Overlapping occurrences
        are all there; of terms with the same `fold_term` form only the first is named; an empty term
        matches nothing.
    """
    if not any(terms):  # no term: nothing to look for (every text is planned, most without terms)
        return []
    root = _trie(tuple(terms), casefold)
    folded = [_fold(ch, casefold) for ch in text]
    word = [is_word_char(ch) for ch in text]
    found = []
    for start in range(len(text)):
        node, pos = _walk(root, folded[start]), start + 1
        while node is not None:
            if _END in node:
                index, starts_word, ends_word = node[_END]
                glued_before = starts_word and start > 0 and word[start - 1]
                glued_after = ends_word and pos < len(text) and word[pos]
                if not glued_before and not glued_after:
                    found.append((start, pos, index))
            if pos == len(text):
                break
            if text[pos].isspace():
                node = node.get(_WHITESPACE)
                while pos < len(text) and text[pos].isspace():
                    pos += 1
            else:
                node, pos = _walk(node, folded[pos]), pos + 1
    return found


def read_list(path: str | os.PathLike[str]) -> list[tuple[int, str]]:
    """The (1-based line number, line) pairs of a UTF-8 term list, without blank lines and comments (lines
    whose first non-blank character is "#").

    Raises:
        UserError: the file is missing, a directory, empty or not UTF-8, naming it (and the line).
    """
    return [(n, line) for n, line in enumerate(iter_lines(path), start=1) if line.strip()[:1] not in ("", "#")]


def clean_term(term: str, *, what: str, where: str) -> str:
    """`term` with its ends stripped and inner whitespace runs as one space.

    Args:
        what: What the term is, for the message: "source term", "target form", "term".
        where: Where it was given: "terms.tsv:3", "glossary[2]".

    Raises:
        UserError: `term` is not a string, is blank, or holds a tab or line break (a file split wrongly).
    """
    if not isinstance(term, str):
        raise UserError(f"{where}: {what} must be a string, got {type(term).__name__}")
    if any(ch in _BREAKS for ch in term):
        raise UserError(f"{where}: {what} {shorten(term)} contains a tab or line break")
    if not (cleaned := " ".join(term.split())):
        raise UserError(f"{where}: empty {what}")
    return cleaned


def shorten(text: str, limit: int = 60) -> str:
    """`text` quoted for a one-line message, its middle elided past `limit` characters."""
    return repr(text if len(text) <= limit else f"{text[: limit // 2]}...{text[-limit // 2 :]}")


@lru_cache(maxsize=1 << 16)
def _fold(ch: str, casefold: bool) -> str:
    """One character's compared form (Unicode's canonical caseless matching when `casefold`)."""
    nfd = unicodedata.normalize("NFD", ch)
    return unicodedata.normalize("NFD", nfd.casefold()) if casefold else nfd


@lru_cache(maxsize=64)
def _trie(terms: tuple[str, ...], casefold: bool) -> dict:
    """Nested dicts keyed by the characters of the terms' folded forms; `node[_END]` = (index of the term,
    whether it starts with a word character, whether it ends with one). Cached: a translator matches every
    sentence against the same list."""
    root: dict = {}
    for index, term in enumerate(terms):
        if key := fold_term(term, casefold=casefold):
            node = root
            for ch in key:
                node = node.setdefault(ch, {})
            node.setdefault(_END, (index, is_word_char(key[0]), is_word_char(key[-1])))
    return root


def _walk(node: dict, chars: str) -> dict | None:
    """The node reached from `node` by `chars` (one text character's folded form), or None."""
    for ch in chars:
        if (node := node.get(ch)) is None:
            return None
    return node
