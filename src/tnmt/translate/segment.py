"""A text as the model can translate it: its lines, the sentences of each line, and what lies between them.

A sentence-level model (every model tnmt trains or imports) translates one sentence well and a paragraph badly:
given three sentences it drops or merges some, and past its `max_len` the rest is cut. So a text is split into
segments the model can read, translated as a batch, and joined back with the source's own characters between
them (`Layout.join`):

- Lines are kept: a text of N lines comes back as N lines. A line break, a blank line, the spaces and tabs that
  indent or end a line, and a list marker at a line's start ("- ", "* ", "• ", "1. ", "a) ") lie between
  segments and are copied, never read by the model; an empty line is never sent.
- Each line is split into sentences by sentencex (Wikimedia's segmenter: the abbreviations and numbers of some
  250 languages, "Dr.", "z. B.", "M.", "3.5"; benchmarks/quality/segmenters.py compares it with pysbd and Moses'
  splitter). The whitespace between two sentences is copied as it was.
- A sentence longer than the model reads well (`fits` says which) is split into parts, at the clause
  punctuation nearest its middle (";", ":", ",", a dash), else at the space nearest its middle, again until each
  part fits: every word the caller sent is translated, and `Layout.parts` says which segments are parts of one
  sentence.

Segments start and end at whitespace, so the source's and the translation's whitespace words can be counted
across segments (translate/whole.py).
"""

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sentencex

# a list marker at a line's start: a bullet, or a short number or letter with "." or ")", then whitespace
_MARKER = re.compile(r"[ \t]*(?:[-*•‣◦▪▫–—+>]|\(?\d{1,3}[.)]|\(?[A-Za-z][)])[ \t]+(?=\S)|[ \t]+")
_SPACE_START = re.compile(r"(?<!\s)\s")  # the first of a run of whitespace
_CLAUSE = re.compile(r"[;:,—–](?=\s)|\s[—–-](?=\s)")  # where a long sentence may be cut: after this, at the space
# what sentencex ends a sentence at and should not (benchmarks/quality/segmenters.py): an initial ("J. R. R.",
# French "M. Dupont") or a title before a name
_NOT_AN_END = re.compile(r"(?:^|(?<=\s))(?:[A-Z]|Dr|Mr|Mrs|Ms|Prof|St|MM|Mme|Mlle|Mgr|Me)\.\s*$")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")


@dataclass(frozen=True)
class Layout:
    """A text cut into segments: `spans` are each segment's (start, end) characters in `text`, in order, without
    whitespace at either end; everything outside them is copied as it is. `sentence[i]` is the index of the
    sentence segment i belongs to: the parts of a long sentence share one."""

    text: str
    spans: tuple[tuple[int, int], ...]
    sentence: tuple[int, ...]

    @property
    def segments(self) -> list[str]:
        """What the model translates, in order."""
        return [self.text[start:end] for start, end in self.spans]

    @property
    def parts(self) -> list[int]:
        """How many segments each sentence was cut into (1: it fitted whole)."""
        counts = [0] * (self.sentence[-1] + 1 if self.sentence else 0)
        for s in self.sentence:
            counts[s] += 1
        return counts

    @property
    def sentence_spans(self) -> list[tuple[int, int]]:
        """Each sentence's (start, end) characters in `text`: its parts' together."""
        spans: dict[int, tuple[int, int]] = {}
        for owner, (start, end) in zip(self.sentence, self.spans, strict=True):
            spans[owner] = (spans.get(owner, (start, end))[0], end)
        return list(spans.values())

    def gaps(self) -> list[str]:
        """The characters before each segment, and after the last (len(spans) + 1 strings)."""
        ends = [0, *(end for _, end in self.spans)]
        starts = [*(start for start, _ in self.spans), len(self.text)]
        return [self.text[a:b] for a, b in zip(ends, starts, strict=True)]

    def join(self, translations: Sequence[str]) -> str:
        """The text with each segment replaced by its translation, everything between them as it was."""
        gaps = self.gaps()
        return "".join(gap + t for gap, t in zip(gaps[:-1], translations, strict=True)) + gaps[-1]


def split_text(text: str, language: str, *, fits: Callable[[str], bool] = lambda segment: True) -> Layout:
    """`text` cut into lines, sentences and parts (the module docstring says how); `language`: the source's code,
    which chooses sentencex's abbreviations (a code it does not know falls back to its generic rules)."""
    spans: list[tuple[int, int]] = []
    sentence: list[int] = []
    # sentencex reads UTF-8: a lone surrogate (which JSON allows) becomes U+FFFD for it, at the same offsets
    readable = _SURROGATE.sub("\ufffd", text)
    for line in _LINE.finditer(text):
        start, end = line.start(), line.end()
        while end > start and text[end - 1] in "\r\n":
            end -= 1
        marker = _MARKER.match(text, start, end)
        start = marker.end() if marker else start
        for a, b in _sentences(text, readable, start, end, language):
            parts = _parts(text, a, b, fits)
            sentence += [sentence[-1] + 1 if sentence else 0] * len(parts)
            spans += parts
    return Layout(text, tuple(spans), tuple(sentence))


def _sentences(text: str, readable: str, start: int, end: int, language: str) -> list[tuple[int, int]]:
    """The sentences of text[start:end] (one line) as stripped spans (`readable`: the text as sentencex can read
    it); a boundary sentencex puts inside a word ("e.g.Paris") is not taken, so that segments start and end at
    whitespace."""
    spans: list[tuple[int, int]] = []
    at = start
    for found in sentencex.segment(language, readable[start:end]):
        a = readable.find(found, at, end) if found else -1
        if a < 0:  # sentencex gives the text back piece by piece: never here, but nothing may be lost
            return _strip(text, [(start, end)])
        at = a + len(found)
        glued = spans and a > 0 and not text[a - 1].isspace() and not text[a].isspace()
        if glued or (spans and _not_an_end(text, spans[-1][0], a)):
            spans[-1] = (spans[-1][0], at)
        else:
            spans.append((a, at))
    if at < end:
        spans.append((at, end))
    return _strip(text, spans)


def _not_an_end(text: str, start: int, end: int) -> bool:
    """Whether the sentence text[start:end] ends in an initial or a title (`_NOT_AN_END`), read in its last few
    characters only: a run of initials merged into one sentence ("A. B. C. ...") is not read again each time."""
    tail = end
    while tail > start and text[tail - 1].isspace():
        tail -= 1
    return _NOT_AN_END.search(text, max(start, tail - 5), end) is not None  # "Mlle." is the longest


def _strip(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans without whitespace at either end; blank ones dropped."""
    stripped = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            stripped.append((a, b))
    return stripped


def _parts(text: str, start: int, end: int, fits: Callable[[str], bool]) -> list[tuple[int, int]]:
    """text[start:end] whole when `fits` takes it, else cut in two at its safest point and each side cut again."""
    if fits(text[start:end]):
        return [(start, end)]
    cut = _cut(text, start, end)
    if cut is None:  # one unbroken word: nothing safe to cut at, translated (and truncated) whole
        return [(start, end)]
    left, right = _strip(text, [(start, cut)]), _strip(text, [(cut, end)])
    return [part for a, b in left + right for part in _parts(text, a, b, fits)]


def _cut(text: str, start: int, end: int) -> int | None:
    """Where to cut a long sentence: the space after the clause punctuation nearest its middle (that is not at
    either end), else the space nearest its middle; None when it has no inner space. Each is found searching out
    from the middle (`_nearest`), so the halving of a long sentence costs the length of its spans, not a walk over
    every candidate of every span."""
    middle = (start + end) / 2
    quarter = (end - start) / 4  # a clause end far from the middle leaves a long side
    low, high = max(start + 1, math.ceil(middle - quarter)), min(end - 2, math.floor(middle + quarter))
    clause = _nearest(_CLAUSE, text, start, end, middle, low, high, at_end=True)
    if clause is not None:
        return clause
    return _nearest(_SPACE_START, text, start, end, middle, start + 1, end - 1, at_end=False)


def _nearest(
    pattern: re.Pattern[str],
    text: str,
    start: int,
    end: int,
    middle: float,
    low: int,
    high: int,
    *,
    at_end: bool,
) -> int | None:
    """The match of `pattern` in text[start:end] whose position (its end when `at_end`, else its start) lies in
    [low, high] nearest `middle`, the left one of two as near; None without one. The first at or after the middle
    is searched forward up to `high`; the last before it in windows that grow leftwards from the middle down to
    `low` (a match that straddles a window's start ends where the full scan's does, or is found in the next one)."""
    place = (lambda m: m.end()) if at_end else (lambda m: m.start())
    after = None
    for m in pattern.finditer(text, max(start, math.floor(middle) - 2), min(end, high + 1)):
        if place(m) >= middle:
            after = place(m) if place(m) <= high else None
            break
    before, width = None, 64
    while True:
        a = max(start, math.ceil(middle) - width)
        for m in pattern.finditer(text, a, min(end, math.ceil(middle) + 1)):
            if place(m) >= middle:
                break
            before = place(m)
        if before is not None or a <= low:  # the last one before the middle, or none that may be taken
            break
        width *= 4
    if before is not None and before < low:
        before = None
    if before is None or (after is not None and after - middle < middle - before):
        return after
    return before
