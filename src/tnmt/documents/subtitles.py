"""SubRip subtitles (.srt), read and written by the `srt` library: every cue keeps its number and timings, its
text is translated as one unit (a sentence cut across a cue's lines reads whole) and re-flowed into as many lines
as it had, balanced by characters (a viewer's eye expects the cue's shape)."""

from functools import cache

import srt

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
