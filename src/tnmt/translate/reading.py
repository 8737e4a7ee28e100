"""A text read as the model will read it: cut into segments the model can read whole, each prepared once.

`Reader.split` is the one door in for text: with segmentation on (`DecodeConfig.segment`), each text is cut into
lines, sentences and parts of a sentence too long for the model (translate/segment.py), each part's fit measured
on what the model reads of it (the text less the spans kept as written under its steering); each segment is then
planned and tokenised once (translate/prepared.py's `prepare`), with its share of its text's steering
(translate/whole.py's `segment_steering`). The `Split` it returns joins the segments' translations back.
"""

from collections.abc import Sequence
from typing import Protocol

from tnmt.config import DecodeConfig
from tnmt.errors import UserError
from tnmt.translate.prepared import Planner, Prepared, Tokenised, prepare
from tnmt.translate.segment import Layout, split_text
from tnmt.translate.steering import Steering, SteeringTokenizer
from tnmt.translate.whole import Split, segment_steering


class TextTokenizer(Protocol):
    """What a `Translator` needs of `tnmt.data.tokenizer.Tokenizer`: a `SteeringTokenizer` that knows its
    languages."""

    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int
    languages: tuple[str, ...]
    term_markers: tuple[int, int] | None

    def language_id(self, language: str) -> int: ...
    def encode_target(self, text: str) -> list[int]: ...
    def encode_source_pieces(self, text: str) -> tuple[list[int], list[str]]: ...
    def decode_target(self, ids: Sequence[int]) -> str: ...
    def target_pieces(self, ids: Sequence[int]) -> list[str]: ...


class Reader:
    """How one model reads text: its tokenizer, its planner (what it learns of its vocabularies once) and its
    positions (`max_len`, EOS included)."""

    def __init__(self, tokenizer: SteeringTokenizer, planner: Planner, *, max_len: int) -> None:
        self.tokenizer, self.planner, self.max_len = tokenizer, planner, max_len

    def split(
        self,
        texts: Sequence[str],
        steering: Sequence[Steering | None],
        settings: DecodeConfig,
        *,
        start: int,
        language: str,
        first_line: int = 1,
    ) -> Split:
        """The texts cut into segments (`language`'s sentence rules) when `settings.segment`, each segment
        prepared with its share of its text's steering; else each text prepared whole. Every decoder starts from
        `start`; warnings name lines from `first_line`.

        Raises:
            UserError: a steering entry that cannot be met, or not one steering per text.
        """
        if len(steering) != len(texts):
            raise UserError(f"{len(steering)} steering entries for {len(texts)} texts: give one per text")
        tokenise = Tokenised(self.tokenizer)  # each segment read once: measured, planned and prepared
        if not settings.segment:
            lines = range(first_line, first_line + len(texts))
            return Split(None, self.prepare(texts, steering, settings, start=start, lines=lines, tokenise=tokenise))
        layouts = [self.layout(text, one, language, tokenise) for text, one in zip(texts, steering, strict=True)]
        segments = [segment for layout in layouts for segment in layout.segments]
        steered = [
            segment_steering(one, i)
            for layout, one in zip(layouts, steering, strict=True)
            for i in range(len(layout.spans))
        ]
        lines = [first_line + n for n, layout in enumerate(layouts) for _ in layout.spans]
        return Split(layouts, self.prepare(segments, steered, settings, start=start, lines=lines, tokenise=tokenise))

    def prepare(
        self,
        texts: Sequence[str],
        steering: Sequence[Steering | None],
        settings: DecodeConfig,
        *,
        start: int,
        lines: Sequence[int],
        tokenise: Tokenised | None = None,
    ) -> list[Prepared]:
        """Each text as the search will read it, as one segment (translate/prepared.py), its output at most
        `settings.max_len` tokens (the model's positions at most); `lines`: each text's line in warnings;
        `tokenise`: what was read of the texts already."""
        model_cap = self.max_len - 1
        return prepare(
            texts,
            steering,
            planner=self.planner,
            tokenizer=self.tokenizer,
            start=start,
            model_max_len=self.max_len,
            max_tokens=min(settings.max_len or model_cap, model_cap),
            lines=lines,
            tokenise=tokenise,
        )

    def layout(self, text: str, steering: Steering | None, language: str, tokenise: Tokenised | None = None) -> Layout:
        """`text` cut into lines, sentences and parts of sentences too long for the model (translate/segment.py),
        each part's fit measured on what the model reads of it under `steering` (tokenised by `tokenise`, which
        keeps it for the segment's planning)."""
        tokenise = tokenise or Tokenised(self.tokenizer)
        return split_text(text, language, fits=lambda segment: self.fits(segment, steering, tokenise))

    def fits(self, segment: str, steering: Steering | None, tokenise: Tokenised) -> bool:
        """Whether the model can read `segment` whole: the tokens of what it reads (the text less the spans kept as
        written under `steering`: URLs, e-mail addresses, emoji, markup, characters it cannot read, do-not-translate
        terms; `Planner.read`) fit the model's positions, EOS included."""
        if self._short(segment):  # what it reads is shorter still: no need to find its kept spans
            return True
        read = self.planner.read(segment, steering)
        if self._short(read):
            return True
        return tokenise.fits(read, self.max_len - 1)

    def _short(self, text: str) -> bool:
        """Whether `text` fits the model's positions whatever its pieces: a piece is at least one byte or a word's
        start mark, so a text this short needs no tokenising to know."""
        return len(text.encode("utf-8", "surrogatepass")) + len(text) < self.max_len
