"""Subtitles: SubRip (.srt, the `srt` library) and WebVTT (.vtt, `webvtt-py`). Every cue keeps its number (or
identifier), timings and settings, and a WebVTT file its header and NOTE blocks; a cue's text is translated as one
unit (a sentence cut across its lines reads whole) and re-flowed into as many lines as it had, the longest line as
short as the words allow (a viewer's eye expects the cue's shape). A WebVTT cue's tags (`<i>`, `<b>`,
`<v Speaker>`, `<c.class>`) are inline markup carried to the aligned words (documents/markup.py)."""

import io
import re
from itertools import accumulate

import srt
import webvtt

from tnmt.documents.units import Unit, unit
from tnmt.errors import UserError


def read_srt(data: str, *, where: str) -> tuple[list[srt.Subtitle], list[Unit]]:
    """The cues of a SubRip file and a unit per cue (its lines joined by spaces).

    Raises:
        UserError: not SubRip (the library's reason, after `where`).
    """
    try:
        cues = list(srt.parse(data))
    except (srt.SRTParseError, ValueError) as error:
        raise UserError(f"{where}: not a SubRip file ({error})") from None
    return cues, [unit(" ".join(cue.content.split())) for cue in cues]


def write_srt(cues: list[srt.Subtitle], translations: list[str]) -> str:
    """The file with each cue's text replaced by its translation, in as many lines as the cue had."""
    out = []
    for cue, text in zip(cues, translations, strict=True):
        lines = max(1, len([line for line in cue.content.splitlines() if line.strip()]))
        out.append(srt.Subtitle(cue.index, cue.start, cue.end, "\n".join(reflow(text, lines)), cue.proprietary))
    return srt.compose(out, reindex=False)


def reflow(text: str, lines: int) -> list[str]:
    """`text`'s words in `lines` lines (fewer only when it has fewer words), the longest line as short as the
    words allow; of equally long layouts, the one whose upper lines are shorter (subtitles are read bottom-heavy).

    The narrowest width is found by bisection, each width tried by a greedy count of the lines it needs; then
    each line, from the top, ends at its first word after which the rest still fits: O(n log longest word) in the
    words, whatever `lines` is."""
    words = text.split()
    lines = max(1, min(lines, len(words)))
    if lines == 1:
        return [" ".join(words)]
    ends = [0, *accumulate(len(w) + 1 for w in words)]  # words[a:b] on one line: ends[b] - ends[a] - 1 characters
    # greedy lines of width w fill more than w - longest - 1 characters each but the last, so at this width they
    # are never more than `lines`: the bisection's range is the longest word's, whatever the text's length
    longest = max(map(len, words))
    low, high = longest, min(ends[-1] - 1, -(-ends[-1] // lines) + longest)
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if _fewest_lines(ends, middle)[0] <= lines else (middle + 1, high)
    fewest = _fewest_lines(ends, low)
    bounds = [0]
    for left in range(lines - 1, 0, -1):  # lines still to fill below this one
        cut = bounds[-1] + 1
        while fewest[cut] > left:
            cut += 1
        bounds.append(cut)
    bounds.append(len(words))
    return [" ".join(words[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def _fewest_lines(ends: list[int], width: int) -> list[int]:
    """For each word i (and the end), the fewest lines of at most `width` characters that words[i:] fill (each
    line as full as it goes, the furthest reach found by one pointer moving forwards)."""
    n = len(ends) - 1
    reach, j = [0] * n, 0
    for i in range(n):
        j = max(j, i + 1)
        while j < n and ends[j + 1] - ends[i] - 1 <= width:
            j += 1
        reach[i] = j
    fewest = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        fewest[i] = 1 + fewest[reach[i]]
    return fewest


def read_vtt(data: str, *, where: str) -> tuple[webvtt.WebVTT, list[str]]:
    """The captions of a WebVTT file and each cue's text as an inline-markup fragment (its lines joined).

    Raises:
        UserError: not WebVTT (the library's reason, after `where`).
    """
    try:
        captions = webvtt.from_buffer(io.StringIO(data))
    except (webvtt.errors.MalformedFileError, webvtt.errors.MalformedCaptionError, ValueError) as error:
        raise UserError(f"{where}: not a WebVTT file ({error})") from None
    return captions, [" ".join(caption.raw_text.split()) for caption in captions]


def write_vtt(captions: webvtt.WebVTT, fragments: list[str]) -> str:
    """The file with each cue's text replaced by its translated fragment, in as many lines as the cue had."""
    for caption, fragment in zip(captions, fragments, strict=True):
        lines = max(1, len([line for line in caption.raw_text.splitlines() if line.strip()]))
        caption.text = reflow_markup(fragment, lines)
    return captions.content


_TAG = re.compile(r"<[^<>]*>")  # a "<" inside is text: "a < b <i>c</i>" keeps "a < b " (and reads it in one pass)


def reflow_markup(markup: str, lines: int) -> str:
    """`markup`'s words (text between whitespace, whatever tags cut it) in `lines` lines as `reflow` lays them
    out, each tag where it was: the space before each line's first word becomes a line break."""
    layout = reflow(_TAG.sub("", markup), lines)
    breaks, at = set(), 0
    for line in layout[:-1]:
        at += len(line.split())
        breaks.add(at)
    out: list[str] = []
    words, space = 0, None  # words started so far; where the whitespace before the next word is in `out`
    started = False
    for token in re.split(r"(<[^<>]*>|\s+)", markup):
        if not token:
            continue
        if _TAG.fullmatch(token):
            out.append(token)
        elif token.isspace():
            space, started = len(out), False
            out.append(" ")
        else:
            if not started:  # a word begins
                if words in breaks and space is not None:
                    out[space] = "\n"
                words, started = words + 1, True
            out.append(token)
    return "".join(out).strip()
