"""Glossaries: source terms that must be translated a given way, and where they occur in a sentence.

An entry says "translate `dog` as `Hund` or `Hunde`". `match_glossary` finds the entries' source terms in a
sentence; each match becomes a positive lexical constraint of the constrained beam search (one of the entry's
target forms must appear in the output).

- A glossary file (`load_glossary`) is UTF-8 TSV: `source<TAB>target` per line, the target's forms separated
  by "|" (`dog<TAB>Hund | Hunde`); blank lines and lines starting with "#" are skipped.
- Terms are found by the rules of `terms.py` (whole words, any whitespace run for a space, canonically
  equivalent spellings), ignoring case: glossaries are written in dictionary form, and "dog" must catch the
  "Dog" that starts a sentence. Hence a source term given twice with different targets, even in another case,
  is a conflict, refused naming both entries: which target would win is not for us to guess. The same entry
  given twice (the same forms) is kept once: merged glossaries repeat entries.
- A term matches exactly as written: "dog" does not match "dogs" (inflection is language-specific, and a
  guessed form would force a wrong constraint); list "dogs" as an entry of its own.
- Where occurrences overlap, the longest term wins, then the leftmost: in "hot dog stand" with entries "dog"
  and "hot dog", "hot dog" is kept. Matches never overlap, so no word carries two constraints.
"""

import os
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tnmt.errors import UserError
from tnmt.translate.terms import clean_term, find_terms, fold_term, read_list, shorten


class ConflictingEntries(UserError):
    """Two entries give one source term different targets: the request contradicts itself (a server's 422)."""


@dataclass(frozen=True)
class GlossaryEntry:
    """A source term and its target forms, any one of which satisfies it. Build it with `glossary_entry`,
    which validates and normalises; the constructor only refuses what that would never return."""

    source: str  # the source term, e.g. "dog" or "fire truck"
    targets: tuple[str, ...]  # e.g. ("Hund", "Hunde")

    def __post_init__(self) -> None:
        forms = (self.source, *self.targets) if isinstance(self.targets, tuple) and self.targets else (None,)
        if not all(isinstance(s, str) and s and s == " ".join(s.split()) for s in forms):
            raise ValueError(f"GlossaryEntry{(self.source, self.targets)!r} is not normalised: use glossary_entry()")


@dataclass(frozen=True)
class TermMatch:
    """An occurrence of an entry's source term: `text[start:end]`."""

    start: int
    end: int
    entry: GlossaryEntry


def glossary_entry(source: str, targets: str | Sequence[str], *, where: str) -> GlossaryEntry:
    """A validated entry: terms stripped and their inner whitespace runs made one space; a repeated target
    form is kept once (harmless, so not an error).

    Args:
        source: The source term.
        targets: Its target forms: a list, or one string with the forms separated by "|" ("Hund | Hunde").
        where: Where the entry was given, for messages: "terms.tsv:3", "glossary[2]".

    Raises:
        UserError: naming `where`: a blank source or target form, one with a tab or line break, no form.
    """
    if isinstance(targets, str):
        forms = targets.split("|")
    elif isinstance(targets, Sequence):
        forms = list(targets)
    else:
        raise UserError(f"{where}: target must be a string or a list of strings, got {type(targets).__name__}")
    if not forms:
        raise UserError(f"{where}: no target form")
    cleaned = [clean_term(form, what="target form", where=where) for form in forms]
    return GlossaryEntry(clean_term(source, what="source term", where=where), tuple(dict.fromkeys(cleaned)))


def build_glossary(items: Iterable[tuple[str, str | Sequence[str]]], *, where: str = "glossary") -> list[GlossaryEntry]:
    """Entries from (source, targets) pairs (a request's JSON), the i-th named `where[i]` in messages.

    Raises:
        UserError: an invalid entry (see `glossary_entry`), or a source term given twice with different targets
            (naming both).
    """
    return _unique([(glossary_entry(s, t, where=f"{where}[{i}]"), f"{where}[{i}]") for i, (s, t) in enumerate(items)])


def load_glossary(path: str | os.PathLike[str]) -> list[GlossaryEntry]:
    """The entries of a glossary file (the module docstring gives its format), in file order.

    Raises:
        UserError: one line naming the file and line: the file is missing, a directory, empty or not UTF-8,
            a line is not `source<TAB>target`, an entry is invalid, or a source term repeats an earlier one with
            other targets.
    """
    entries = []
    for number, line in read_list(path):
        where = f"{path}:{number}"
        if line.count("\t") != 1:
            raise UserError(f"{where}: expected 'source<TAB>target', got {shorten(line)}")
        source, targets = line.split("\t")
        entries.append((glossary_entry(source, targets, where=where), where))
    return _unique(entries)


def match_glossary(text: str, entries: Sequence[GlossaryEntry]) -> list[TermMatch]:
    """Where the entries' source terms occur in `text`: the longest term first, then the leftmost, each
    occurrence kept unless it overlaps one kept before (module docstring).

    Returns:
        Non-overlapping matches sorted by start. Of entries whose source terms differ only in case, spacing
        or normalisation form, the first is named.
    """
    found = find_terms(text, [entry.source for entry in entries], casefold=True)
    starts: list[int] = []
    ends: list[int] = []
    kept: list[TermMatch] = []
    for start, end, index in sorted(found, key=lambda f: (-len(entries[f[2]].source), f[0])):
        at = bisect_right(starts, start)  # kept matches are disjoint, so only the neighbours can overlap
        if (at and ends[at - 1] > start) or (at < len(starts) and starts[at] < end):
            continue
        starts.insert(at, start)
        ends.insert(at, end)
        kept.insert(at, TermMatch(start, end, entries[index]))
    return kept


def _unique(entries: list[tuple[GlossaryEntry, str]]) -> list[GlossaryEntry]:
    """The entries, each kept once, after checking that no source term repeats an earlier one with other targets
    (case ignored, as in matching; the forms' order too)."""
    first: dict[str, tuple[GlossaryEntry, str]] = {}
    for entry, where in entries:
        key = fold_term(entry.source, casefold=True)
        if key not in first:
            first[key] = entry, where
            continue
        earlier, there = first[key]
        if set(earlier.targets) != set(entry.targets):
            raise ConflictingEntries(
                f"{where}: {_shown(entry)} conflicts with {there}: {_shown(earlier)} (case is ignored);"
                " give each term once, with all its target forms ('A | B')"
            )
    return [entry for entry, _ in first.values()]


def _shown(entry: GlossaryEntry) -> str:
    return f"{shorten(entry.source)} -> {shorten(' | '.join(entry.targets))}"
