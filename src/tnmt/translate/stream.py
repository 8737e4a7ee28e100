"""Translating a file of any size in constant memory: bounded chunks, written in input order as they finish.

`Translator.translate` sorts its input by length so batches pad little, which needs the whole input at
hand; a 1,000,000-line file would then sit in memory (with its ids and outputs) before the first line
came out. So a file is cut into chunks of `chunk_lines` lines: each chunk is sorted, decoded and written
in its own input order before the next is read. Memory stays that of one chunk, the first lines come out
early, and a chunk of a few thousand lines still sorts well enough for full batches.

`AnnotatedLines` translates every line under one steering (`tnmt translate --glossary --do-not-translate`) and
adds the evidence of each translation to its line, in tab-separated columns (`--alignment --scores --warnings`).
"""

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from tnmt.config import DecodeConfig
from tnmt.data.corpus import chunked

if TYPE_CHECKING:
    from tnmt.translate.steering import Steering
    from tnmt.translate.translator import Translator

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


class AnnotatedLines:
    """A `LinesTranslator` whose lines are translated under `steering` (None: none), each the translation and,
    after a tab each and in this order: the word alignment as Pharaoh `i-j` pairs (source word i, target word j,
    0-based over whitespace words); the sentence confidence and the words' probabilities (space-separated); the
    warnings (comma-separated). A column asked for is always there, empty when it has nothing (an empty line, a
    clean translation)."""

    def __init__(
        self,
        translator: "Translator",
        *,
        steering: "Steering | None" = None,
        alignment: bool = False,
        scores: bool = False,
        warnings: bool = False,
    ) -> None:
        self.translator, self.steering = translator, steering
        self.alignment, self.scores, self.warnings = alignment, scores, warnings

    def translate(
        self, texts: Sequence[str], settings: DecodeConfig | None = None, *, first_line: int = 1
    ) -> list[str]:
        lines, evidence = [], self.alignment or self.scores or self.warnings
        steered = {"steering": [self.steering] * len(texts)} if self.steering is not None else {}
        found = self.translator.translations(texts, settings, evidence=evidence, first_line=first_line, **steered)
        for translation in found:
            evidence, columns = translation.evidence, [translation.text]
            if self.alignment:
                columns.append(" ".join(f"{i}-{j}" for i, j in evidence.alignment))
            if self.scores:
                columns += [f"{evidence.confidence:.4f}", " ".join(f"{p:.4f}" for p in evidence.word_probs)]
            if self.warnings:
                columns.append(",".join(evidence.warnings))
            lines.append("\t".join(columns))
        return lines
