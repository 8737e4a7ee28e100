"""A paragraph of formatted runs (Word's w:r, PowerPoint's a:r) as inline markup, and back.

The runs whose formatting differs from the paragraph's commonest one (by characters) become `<span data-run="k">`
elements around their text; the commonest formatting is the paragraph's plain text. Tag transfer places the
elements around the translated words aligned to theirs (documents/tag_transfer.py); `pieces` reads the
translated fragment back as (source run, text) pieces, which the format writes as runs with those runs'
formatting (None: the plain run's).
"""

import html
import re
from collections import Counter
from collections.abc import Sequence
from html.parser import HTMLParser

XML_INVALID = re.compile("[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\ufffe\\uffff\\ud800-\\udfff]")  # a model may write them


def plain_run(texts: Sequence[str], formats: Sequence[bytes]) -> int:
    """The index of the first run with the paragraph's commonest formatting, by characters."""
    weights: Counter[bytes] = Counter()
    for text, form in zip(texts, formats, strict=True):
        weights[form] += len(text)
    common = weights.most_common(1)[0][0]
    return formats.index(common)


def fragment(texts: Sequence[str], formats: Sequence[bytes]) -> str:
    """The runs as inline markup: plain runs as text, the others as `<span data-run="k">`."""
    plain = formats[plain_run(texts, formats)]
    parts = []
    for k, (text, form) in enumerate(zip(texts, formats, strict=True)):
        escaped = html.escape(text, quote=False)
        parts.append(escaped if form == plain else f'<span data-run="{k}">{escaped}</span>')
    return "".join(parts)


class _Pieces(HTMLParser):
    """A translated fragment as (the run it came from or None, text) pieces, in order; text outside every
    element, and inside an element that names no run, is plain (None)."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[tuple[int | None, str]] = []
        self._open: list[int | None] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        run = dict(attrs).get("data-run")
        self._open.append(int(run) if run is not None and run.isdigit() else None)

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        source = next((k for k in reversed(self._open) if k is not None), None)
        data = XML_INVALID.sub("", data)
        if self.pieces and self.pieces[-1][0] == source:
            self.pieces[-1] = (source, self.pieces[-1][1] + data)
        elif data:
            self.pieces.append((source, data))


def pieces(markup: str) -> list[tuple[int | None, str]]:
    """The translated fragment's pieces (see `_Pieces`)."""
    return _Pieces(markup).pieces
