"""Glossaries: source terms and the target terms a translation must use for them, read from TSV and matched in text.

A term matches where it occurs as whole words (not "dog" in "hotdog" or "dogs": a glossary names the forms it
means), case-insensitively ("Dog" and "DOG" match "dog"), a multi-word term across any run of
whitespace. Where entries overlap ("fire" and "fire truck") the longest match wins, then the leftmost; matches
never overlap. Only entries whose first word occurs in the text are searched, so a large glossary costs little.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tnmt.errors import UserError

FORM_SEPARATOR = "|"  # "Hund | Hunde": either form meets the entry


@dataclass(frozen=True)
class GlossaryEntry:
    """A source term and its target forms, any one of which a translation may use."""

    source: str
    targets: tuple[str, ...]


@dataclass(frozen=True)
class TermMatch:
    """An occurrence of an entry's source term: the text's characters [start, end)."""

    start: int
    end: int
    entry: GlossaryEntry


def glossary_entry(source: str, targets: str | Sequence[str], *, where: str) -> GlossaryEntry:
    """A checked entry: whitespace runs made single spaces, a string of targets split on " | ", repeated forms
    dropped.

    Raises:
        UserError: an empty source term or target form, or one with a tab or a line break; names `where`.
    """
    term = _normalised(source, where=f"{where}: source term")
    pieces = targets.split(FORM_SEPARATOR) if isinstance(targets, str) else list(targets)
    if not pieces:
        raise UserError(f"{where}: no target term")
    forms = tuple(dict.fromkeys(_normalised(form, where=f"{where}: target term") for form in pieces))
    return GlossaryEntry(term, forms)


def load_glossary(path: str | Path) -> list[GlossaryEntry]:
    """The entries of a TSV file: `source<TAB>target` per line, the target listing forms as "Hund | Hunde"; blank
    lines and lines starting with "#" are skipped.

    Raises:
        UserError: an unreadable file, a line without exactly one tab, a bad term, or a source term given twice
            (naming both lines).
    """
    entries, seen = [], {}
    for number, line in _lines(path):
        fields = line.split("\t")
        if len(fields) != 2:
            raise UserError(f"{path}:{number}: expected 'source<TAB>target', got {line[:80]!r}")
        entry = glossary_entry(fields[0], fields[1], where=f"{path}:{number}")
        key = entry.source.casefold()
        if key in seen:
            raise UserError(f"{path}:{number}: {entry.source!r} is already on line {seen[key]}")
        seen[key] = number
        entries.append(entry)
    return entries


def load_terms(path: str | Path) -> list[str]:
    """Do-not-translate terms, one per line (blank lines and "#" lines skipped), whitespace runs made one space.

    Raises:
        UserError: an unreadable file, or a line with a tab.
    """
    return [_normalised(line, where=f"{path}:{number}") for number, line in _lines(path)]


def match_glossary(text: str, entries: Sequence[GlossaryEntry]) -> list[TermMatch]:
    """Where the entries' source terms occur in `text` (the module docstring's rules), sorted by start."""
    if not entries:
        return []
    by_key: dict[str, GlossaryEntry] = {}
    for entry in entries:
        by_key.setdefault(_key(entry.source), entry)
    present = {word.casefold() for word in re.findall(r"\w+", text)}
    found = []  # every occurrence of every term, overlapping ones included
    for entry in by_key.values():
        first = re.search(r"\w+", entry.source)
        if first is not None and first.group().casefold() not in present:
            continue  # cheap: most entries of a large glossary are not in a given sentence
        words = r"\s+".join(re.escape(word) for word in entry.source.split(" "))
        found += [(m.start(), m.end(), entry) for m in re.finditer(rf"(?<!\w){words}(?!\w)", text, re.IGNORECASE)]
    chosen: list[tuple[int, int, GlossaryEntry]] = []
    for start, end, entry in sorted(found, key=lambda f: (f[0] - f[1], f[0])):  # longest first, then leftmost
        if all(end <= s or e <= start for s, e, _ in chosen):
            chosen.append((start, end, entry))
    return [TermMatch(start, end, entry) for start, end, entry in sorted(chosen, key=lambda c: c[0])]


def _key(term: str) -> str:
    return " ".join(term.casefold().split())


def _normalised(term: str, *, where: str) -> str:
    if "\t" in term or "\n" in term or "\r" in term:
        raise UserError(f"{where}: a term cannot hold a tab or a line break")
    cleaned = " ".join(term.split())
    if not cleaned:
        raise UserError(f"{where}: an empty term")
    return cleaned


def _lines(path: str | Path) -> list[tuple[int, str]]:
    """(1-based number, text) of the lines that hold an entry."""
    try:
        raw = Path(path).read_bytes()
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a file") from None
    except OSError as error:
        raise UserError(f"{path}: cannot read: {error.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: not UTF-8") from None
    lines = text.splitlines()
    return [
        (n, line.rstrip("\r")) for n, line in enumerate(lines, 1) if line.strip() and not line.lstrip().startswith("#")
    ]
