"""Text in, text out: the tokenizer, batching and search around a trained Transformer.

`Translator.translate` keeps the caller's order and line alignment while batching for speed: it
sorts sentences by length so a batch pads little, decodes batch by batch and puts results back
where their inputs were. An empty (or all-whitespace) line gives an empty line without running the
model. A sentence longer than the model's `max_len` positions is truncated, with a warning, to its
first `max_len - 1` tokens plus EOS, so one bad line cannot stop a whole file.
"""

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import torch
from torch import Tensor

from tnmt.decode.beam import Hypothesis, beam_search_nbest
from tnmt.decode.greedy import greedy_search
from tnmt.decode.quantize import quantize_int8
from tnmt.decode.step import DEFAULT_MAX_LEN_A, DEFAULT_MAX_LEN_B
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

    def __init__(self, model: Transformer, tokenizer: TextTokenizer) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device

    @classmethod
    def from_checkpoint(
        cls, path: str | os.PathLike[str], *, device: str = "cpu", quantize: str | None = None
    ) -> "Translator":
        """Load a checkpoint directory written by training (or a `best`/`last` link to one).

        `quantize="int8"` runs the Linear layers in int8 on the CPU (see `tnmt.decode.quantize`).
        """
        # Imported here: the checkpoint module pulls in training code that translating never needs.
        from tnmt.train.checkpoint import load_checkpoint

        if quantize not in (None, "int8") or (quantize and device != "cpu"):
            raise ValueError(f"quantize must be None or 'int8' (CPU only), got {quantize!r} on {device}")
        checkpoint = load_checkpoint(path, map_location=device)
        model = checkpoint.model.to(device)
        return cls(quantize_int8(model) if quantize else model, checkpoint.tokenizer)

    def translate(
        self,
        texts: Sequence[str],
        *,
        beam_size: int = 4,
        max_len: int | None = None,
        length_penalty: float = 0.6,
        min_len: int = 0,
        max_len_a: float = DEFAULT_MAX_LEN_A,
        max_len_b: int = DEFAULT_MAX_LEN_B,
        batch_size: int = 64,
    ) -> list[str]:
        """The best translation of each text, in input order.

        Args:
            texts: One sentence per item; an empty or all-whitespace item gives "".
            beam_size: K of beam search (section 6.1: 4); 1 runs greedy search, with the same result
                as a beam of 1.
            max_len: Absolute cap on output tokens; see `tnmt.decode.step.output_limits`.
            length_penalty: alpha of the GNMT length penalty (section 6.1: 0.6).
            min_len: Output tokens before EOS is allowed.
            max_len_a: Relative cap a * source length + b (the paper: a = 1, b = 50).
            max_len_b: See `max_len_a`.
            batch_size: Sentences decoded together; more is faster per sentence, up to memory.
        """
        limits = dict(max_len=max_len, min_len=min_len, max_len_a=max_len_a, max_len_b=max_len_b)
        if beam_size == 1:
            outputs = self._batched(texts, batch_size, lambda src: greedy_search(self.model, src, **limits))
            return [self.tokenizer.decode_target(ids) if ids is not None else "" for ids in outputs]
        options = dict(beam_size=beam_size, length_penalty=length_penalty, batch_size=batch_size)
        nbest = self.translate_nbest(texts, n_best=1, **options, **limits)
        return [results[0].text for results in nbest]

    def translate_nbest(
        self,
        texts: Sequence[str],
        *,
        n_best: int,
        beam_size: int = 4,
        max_len: int | None = None,
        length_penalty: float = 0.6,
        min_len: int = 0,
        max_len_a: float = DEFAULT_MAX_LEN_A,
        max_len_b: int = DEFAULT_MAX_LEN_B,
        batch_size: int = 64,
    ) -> list[list[TranslationResult]]:
        """The `n_best` translations of each text with scores, best first; `[EMPTY]` for an empty text.

        Arguments as for `translate`; `n_best` is at most `beam_size`.
        """

        def search(src: Tensor) -> list[list[Hypothesis]]:
            return beam_search_nbest(
                self.model,
                src,
                beam_size=beam_size,
                n_best=n_best,
                max_len=max_len,
                length_penalty=length_penalty,
                min_len=min_len,
                max_len_a=max_len_a,
                max_len_b=max_len_b,
            )

        decode = self.tokenizer.decode_target
        return [
            [EMPTY]
            if hyps is None
            else [TranslationResult(decode(h.tokens), h.tokens, h.score, h.log_prob) for h in hyps]
            for hyps in self._batched(texts, batch_size, search)
        ]

    def attention(self, text: str, *, beam_size: int = 1) -> tuple[list[str], list[str], AttentionMaps]:
        """Translate `text`, then return the attention weights the model used for that translation.

        Returns:
            The source pieces (EOS included), the decoder's input pieces (BOS then the output; row i
            of a decoder map is where the token after piece i was chosen), and every layer's maps
            for batch size 1.

        Raises:
            ValueError: `text` is empty.
        """
        if not text.strip():
            raise ValueError("cannot show attention for an empty text")
        ids = self._source_ids(text, 0)
        src = torch.tensor([ids], device=self.device)  # (1, S)
        if beam_size == 1:
            output = greedy_search(self.model, src)[0]
        else:
            output = beam_search_nbest(self.model, src, beam_size=beam_size)[0][0].tokens
        tgt = [self.tokenizer.bos_id, *output]
        _, maps = self.model.attention_maps(src, torch.tensor([tgt], device=self.device))
        eos_piece = self.tokenizer.target_pieces([self.tokenizer.eos_id])
        src_pieces = self.tokenizer.source_pieces(text)[: len(ids) - 1] + eos_piece
        return src_pieces, self.tokenizer.target_pieces(tgt), maps

    def _batched(self, texts: Sequence[str], batch_size: int, search: Callable[[Tensor], list[R]]) -> list[R | None]:
        """Run `search` on length-sorted padded batches; results in input order, None for empty texts."""
        sources = [self._source_ids(text, i) if text.strip() else None for i, text in enumerate(texts)]
        order = [i for i, ids in enumerate(sources) if ids is not None]
        order.sort(key=lambda i: -len(sources[i]))
        results: list[R | None] = [None] * len(texts)
        pad_id = self.model.config.pad_id
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = len(sources[chunk[0]])  # the longest: sorted by decreasing length
            rows = [sources[i] + [pad_id] * (width - len(sources[i])) for i in chunk]
            for i, result in zip(chunk, search(torch.tensor(rows, device=self.device)), strict=True):
                results[i] = result
        return results

    def _source_ids(self, text: str, index: int) -> list[int]:
        """Source ids plus EOS, truncated (with a warning) to the model's `max_len` positions."""
        ids = self.tokenizer.encode_source(text)
        limit = self.model.config.max_len - 1
        if len(ids) > limit:
            warnings.warn(
                f"input {index}: {len(ids)} source tokens exceed the model's max_len "
                f"({self.model.config.max_len} positions, EOS included); translating the first {limit}",
                stacklevel=3,
            )
            ids = ids[:limit]
        return [*ids, self.tokenizer.eos_id]
