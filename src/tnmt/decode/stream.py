"""Translating a file of any size in constant memory: bounded chunks, written in input order as they finish.

`Translator.translate` sorts its input by length so batches pad little, which needs the whole input at
hand; a 1,000,000-line file would then sit in memory (with its ids and outputs) before the first line
came out. So a file is cut into chunks of `chunk_lines` lines: each chunk is sorted, decoded and written
in its own input order before the next is read. Memory stays that of one chunk, the first lines come out
early, and a chunk of a few thousand lines still sorts well enough for full batches.
"""

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from tnmt.config import DecodeConfig
from tnmt.data.corpus import chunked

CHUNK_LINES = 2048


class LinesTranslator(Protocol):
    """What `translate_stream` needs: `Translator` and `CTranslate2Translator` both are one."""

    def translate(
        self, texts: Sequence[str], settings: DecodeConfig | None = None, *, first_line: int = 1
    ) -> list[str]: ...


def translate_stream(
    translator: LinesTranslator,
    lines: Iterable[str],
    settings: DecodeConfig | None = None,
    *,
    chunk_lines: int = CHUNK_LINES,
) -> Iterator[list[str]]:
    """Translate `lines` chunk by chunk with `settings` (default: the translator's); yield each chunk's
    translations, one per line, in input order.

    Warnings about a line (an over-long one, say) name its line number in the whole input.
    """
    if chunk_lines < 1:
        raise ValueError(f"chunk_lines must be positive, got {chunk_lines}")
    first_line = 1
    for chunk in chunked(lines, chunk_lines):
        yield translator.translate(chunk, settings, first_line=first_line)
        first_line += len(chunk)
