"""Subtitles: SubRip (.srt, the `srt` library) and WebVTT (.vtt, `webvtt-py`). Every cue keeps its number (or
identifier), timings and settings, and a WebVTT file its header and NOTE blocks; a cue's text is translated as one
unit (a sentence cut across its lines reads whole) and re-flowed into as many lines as it had, the longest line as
short as the words allow (a viewer's eye expects the cue's shape). A WebVTT cue's tags (`<i>`, `<b>`,
`<v Speaker>`, `<c.class>`) are inline markup carried to the aligned words (serve/libretranslate/markup.py)."""

import io
import re
from functools import cache

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
    words allow; of equally long layouts, the one whose upper lines are shorter (subtitles are read bottom-heavy)."""
    words = text.split()
    lines = max(1, min(lines, len(words)))
    if lines == 1:
        return [" ".join(words)]

    def width(a: int, b: int) -> int:  # characters of words[a:b] on one line
        return sum(len(w) for w in words[a:b]) + (b - a - 1)

    @cache
    def best(start: int, left: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(the line widths, the cuts) of the best layout of words[start:] on `left` lines."""
        if left == 1:
            return (width(start, len(words)),), ()
        options = []
        for cut in range(start + 1, len(words) - left + 2):
            rest, cuts = best(cut, left - 1)
            widths = (width(start, cut), *rest)
            options.append(((max(widths), widths), (cut, *cuts)))
        (_, widths), cuts = min(options)
        return widths, cuts

    _, cuts = best(0, lines)
    bounds = [0, *cuts, len(words)]
    return [" ".join(words[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


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


_TAG = re.compile(r"<[^>]*>")


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
    for token in re.split(r"(<[^>]*>|\s+)", markup):
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
