"""Text in, text out: the tokenizer, batching and search around a trained Transformer.

`Translator.translate` keeps the caller's order and line alignment while batching for speed: it
sorts sentences by length so a batch pads little, decodes batch by batch and puts results back
where their inputs were. An empty (or all-whitespace) line gives an empty line without running the
model. A sentence longer than the model's `max_len` positions is truncated, with a one-line warning, to
its first `max_len - 1` tokens plus EOS, so one bad line cannot stop a whole file. Decoding follows a
`DecodeConfig`: the checkpoint's (what validation measured), with any field overridden per call.
"""

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import torch
from torch import Tensor

from tnmt.checkpoint import load_checkpoint
from tnmt.config import DecodeConfig
from tnmt.decode.beam import Hypothesis, beam_search_nbest
from tnmt.decode.greedy import greedy_search
from tnmt.decode.quantize import quantize_int8
from tnmt.decode.step import fit_source
from tnmt.model import AttentionMaps, Transformer

R = TypeVar("R")


class TextTokenizer(Protocol):
    """What the Translator needs of `tnmt.data.tokenizer.Tokenizer`."""

    pad_id: int
    bos_id: int
    eos_id: int

    def encode_source(self, text: str) -> list[int]: ...
    def decode_target(self, ids: Sequence[int]) -> str: ...
    def source_pieces(self, text: str) -> list[str]: ...
    def target_pieces(self, ids: Sequence[int]) -> list[str]: ...


@dataclass(frozen=True)
class TranslationResult:
    """One translation: its text, ids (no BOS/EOS), length-penalised score and log-probability."""

    text: str
    tokens: list[int]
    score: float
    log_prob: float


EMPTY = TranslationResult(text="", tokens=[], score=0.0, log_prob=0.0)


class Translator:
    """Translate lists of sentences with a model and its tokenizer (the model is put in eval mode)."""

    def __init__(self, model: Transformer, tokenizer: TextTokenizer, decode: DecodeConfig | None = None) -> None:
        """`decode` (default `DecodeConfig()`) is every call's default; `quantize="int8"` quantises the model now."""
        self.decode = decode or DecodeConfig()
        self.device = next(model.parameters()).device
        if self.decode.quantize == "int8" and self.device.type != "cpu":
            raise ValueError(f"quantize='int8' runs on the CPU only, not on {self.device}")
        self.model = quantize_int8(model) if self.decode.quantize == "int8" else model.eval()
        self.tokenizer = tokenizer

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike[str], *, device: str = "cpu", **decode: Any) -> "Translator":
        """Load a checkpoint directory (or a `best`/`last` link to one); its decoding settings, changed by
        any `DecodeConfig` field given in `decode`, become the default (`quantize="int8"`: see `tnmt.decode.quantize`).
        """
        DecodeConfig(**decode)  # a bad setting fails before the slower load
        checkpoint = load_checkpoint(path, map_location=device)
        return cls(checkpoint.model.to(device), checkpoint.tokenizer, replace(checkpoint.decode, **decode))

    def settings(self, **changes: Any) -> DecodeConfig:
        """This translator's `DecodeConfig` with `changes`; `quantize` cannot change after loading."""
        settings = replace(self.decode, **changes)
        if settings.quantize != self.decode.quantize:
            raise ValueError(f"quantize is applied when the Translator is made ({self.decode.quantize!r})")
        return settings

    def translate(self, texts: Sequence[str], *, first_line: int = 1, **decode: Any) -> list[str]:
        """The best translation of each text, in input order; an empty or all-whitespace text gives "".

        Any `DecodeConfig` field in `decode` overrides the translator's default for this call. A beam of 1
        runs greedy search, which gives the same result as beam search with one beam. `first_line` is the
        line number of `texts[0]` in warnings (a file translated chunk by chunk names its own lines).
        """
        settings = self.settings(**decode)
        if settings.beam_size == 1:

            def search(src: Tensor) -> list[list[int]]:
                return greedy_search(self.model, src, settings)

            outputs = self._batched(texts, settings.batch_size, search, first_line)
            return [self.tokenizer.decode_target(ids) if ids is not None else "" for ids in outputs]
        return [results[0].text for results in self.translate_nbest(texts, n_best=1, first_line=first_line, **decode)]

    def translate_nbest(
        self, texts: Sequence[str], *, n_best: int, first_line: int = 1, **decode: Any
    ) -> list[list[TranslationResult]]:
        """The `n_best` translations of each text with scores, best first; `[EMPTY]` for an empty text.

        `decode` and `first_line` as for `translate`; `n_best` is at most the beam size.
        """
        settings = self.settings(**decode)

        def search(src: Tensor) -> list[list[Hypothesis]]:
            return beam_search_nbest(self.model, src, settings, n_best=n_best)

        decode_target = self.tokenizer.decode_target
        return [
            [EMPTY]
            if hyps is None
            else [TranslationResult(decode_target(h.tokens), h.tokens, h.score, h.log_prob) for h in hyps]
            for hyps in self._batched(texts, settings.batch_size, search, first_line)
        ]

    def attention(
        self, text: str, *, output: Sequence[int] | None = None, **decode: Any
    ) -> tuple[list[str], list[str], AttentionMaps]:
        """Translate `text` (settings as for `translate`), then return the attention weights the model used.

        `output` (ids without BOS/EOS, e.g. a `TranslationResult.tokens` already found) skips the search:
        the maps then explain that output, and `decode` is unused.

        Returns:
            The source pieces (EOS included), the decoder's input pieces (BOS then the output; row i
            of a decoder map is where the token after piece i was chosen), and every layer's maps
            for batch size 1.

        Raises:
            ValueError: `text` is empty.
        """
        if not text.strip():
            raise ValueError("cannot show attention for an empty text")
        settings = self.settings(**decode)
        ids = self._source_ids(text, 1)
        src = torch.tensor([ids], device=self.device)  # (1, S)
        if output is None and settings.beam_size == 1:
            output = greedy_search(self.model, src, settings)[0]
        elif output is None:
            output = beam_search_nbest(self.model, src, settings)[0][0].tokens
        tgt = [self.tokenizer.bos_id, *output]
        _, maps = self.model.attention_maps(src, torch.tensor([tgt], device=self.device))
        eos_piece = self.tokenizer.target_pieces([self.tokenizer.eos_id])
        src_pieces = self.tokenizer.source_pieces(text)[: len(ids) - 1] + eos_piece
        return src_pieces, self.tokenizer.target_pieces(tgt), maps

    def batches(self, texts: Sequence[str], batch_size: int) -> list[list[int]]:
        """The indices of `texts` in the batches `translate` decodes, in its order (empty texts in none).

        Translating the texts of some of these batches with the others blanked decodes exactly those
        batches again (the sort is stable and every batch but the last is full): several processes can
        share the work, and each sentence is computed as one process would compute it (train/distributed.py).
        """
        keep = self.model.config.max_len - 1  # what `_source_ids` keeps, before EOS
        lengths = [min(len(self.tokenizer.encode_source(t)), keep) + 1 if t.strip() else None for t in texts]
        return _length_batches(lengths, batch_size)

    def _batched(
        self, texts: Sequence[str], batch_size: int, search: Callable[[Tensor], list[R]], first_line: int
    ) -> list[R | None]:
        """Run `search` on length-sorted padded batches; results in input order, None for empty texts."""
        sources = [self._source_ids(text, first_line + i) if text.strip() else None for i, text in enumerate(texts)]
        results: list[R | None] = [None] * len(texts)
        pad_id = self.model.config.pad_id
        for chunk in _length_batches([None if ids is None else len(ids) for ids in sources], batch_size):
            width = len(sources[chunk[0]])  # the longest: sorted by decreasing length
            rows = [sources[i] + [pad_id] * (width - len(sources[i])) for i in chunk]
            for i, result in zip(chunk, search(torch.tensor(rows, device=self.device)), strict=True):
                results[i] = result
        return results

    def _source_ids(self, text: str, line: int) -> list[int]:
        """Source ids plus EOS, truncated (with a warning naming `line`) to the model's `max_len` positions."""
        ids = fit_source(self.tokenizer.encode_source(text), model_max_len=self.model.config.max_len, line=line)
        return [*ids, self.tokenizer.eos_id]


def _length_batches(lengths: Sequence[int | None], batch_size: int) -> list[list[int]]:
    """Indices of the sources by their lengths (None: an empty text, in no batch), longest first,
    `batch_size` per batch."""
    order = sorted((i for i, n in enumerate(lengths) if n is not None), key=lambda i: -lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
