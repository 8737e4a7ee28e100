"""Text in, text out: the tokenizer, batching and search around a trained Transformer.

`Translator.translations` keeps the caller's order and line alignment while batching for speed: it
sorts sentences by length so a batch pads little, decodes batch by batch and puts results back
where their inputs were. An empty (or all-whitespace) line gives an empty translation without running
the model. A sentence longer than the model's `max_len` positions is truncated, with a one-line warning, to
its first `max_len - 1` tokens plus EOS, so one bad line cannot stop a whole file.

Every result is a `Translation`: the text with its ids and scores, the alternatives when an n-best list
was asked for, and the attention behind it when that was asked for. The same type travels through the
server's batcher to the HTTP answer, and the CTranslate2 engine returns it too. Decoding follows a
`DecodeConfig`: the checkpoint's (what validation measured) unless a call passes its own.
"""

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol

import torch

from tnmt.checkpoint import load_checkpoint
from tnmt.config import DecodeConfig
from tnmt.decode.evidence import Evidence, Sentence, gather_evidence
from tnmt.decode.quantize import quantize_int8
from tnmt.decode.search import search
from tnmt.decode.step import Hypothesis, fit_source, output_limits
from tnmt.decode.trace import SearchRecorder, Trace
from tnmt.model import AttentionMaps, Transformer

QUANTIZE = ("none", "int8")


class TextTokenizer(Protocol):
    """What the Translator needs of `tnmt.data.tokenizer.Tokenizer`."""

    pad_id: int
    bos_id: int
    eos_id: int

    def encode_source(self, text: str) -> list[int]: ...
    def decode_target(self, ids: Sequence[int]) -> str: ...
    def source_pieces(self, text: str) -> list[str]: ...
    def target_pieces(self, ids: Sequence[int]) -> list[str]: ...


class TokenAttention(NamedTuple):
    """The attention weights behind one translation, labelled by subword pieces.

    `source_pieces` ends with EOS; `target_pieces` is the decoder's input (BOS then the output): row i
    of a decoder map is where the token after piece i was chosen. `maps` holds every layer's weights for
    batch size 1.
    """

    source_pieces: list[str]
    target_pieces: list[str]
    maps: AttentionMaps


@dataclass(frozen=True)
class Translation:
    """One source's translation: text, ids (no BOS/EOS), length-penalised score and log-probability.

    `alternatives` holds the next best translations (best first) when an n-best list was asked for,
    `attention` the weights that explain this translation and `evidence` its word alignment, confidence and
    warnings (decode/evidence.py), each when asked for.
    """

    text: str
    tokens: list[int]
    score: float
    log_prob: float
    alternatives: tuple["Translation", ...] = ()
    attention: TokenAttention | None = field(default=None, compare=False)
    evidence: Evidence | None = field(default=None, compare=False)

    @property
    def nbest(self) -> list["Translation"]:
        """This translation and its alternatives, best first."""
        return [self, *self.alternatives]


EMPTY = Translation(text="", tokens=[], score=0.0, log_prob=0.0, evidence=Evidence([], [], 1.0, []))


class Translator:
    """Translate lists of sentences with a model and its tokenizer (the model is put in eval mode)."""

    def __init__(
        self,
        model: Transformer,
        tokenizer: TextTokenizer,
        decode: DecodeConfig | None = None,
        *,
        quantize: str = "none",
        fast_step: bool = True,
    ) -> None:
        """`decode` (default `DecodeConfig()`) is every call's default settings; `quantize="int8"` quantises the
        model now (`tnmt.decode.quantize`): a property of the loaded model, not of a call. `fast_step=False`
        decodes through the model's modules instead of the fast step (decode/fast_step.py), which finds the
        same translations: for comparing, or for a model changed in ways the fast step does not know."""
        if quantize not in QUANTIZE:
            raise ValueError(f"quantize must be one of {QUANTIZE}, got {quantize!r}")
        self.decode = decode or DecodeConfig()
        self.device = next(model.parameters()).device
        if quantize == "int8" and self.device.type != "cpu":
            raise ValueError(f"quantize='int8' runs on the CPU only, not on {self.device}")
        self.quantize = quantize
        self.fast_step = fast_step
        self.model = quantize_int8(model) if quantize == "int8" else model.eval()
        self.tokenizer = tokenizer

    @classmethod
    def from_checkpoint(
        cls, path: str | os.PathLike[str], *, device: str = "cpu", quantize: str = "none", fast_step: bool = True
    ) -> "Translator":
        """Load a checkpoint directory (or a `best`/`last` link to one); its decoding settings become the default."""
        if quantize not in QUANTIZE:  # before the slower load
            raise ValueError(f"quantize must be one of {QUANTIZE}, got {quantize!r}")
        checkpoint = load_checkpoint(path, map_location=device, training=False)
        model = checkpoint.model.to(device).requires_grad_(False)  # ours alone, never trained: frozen (fast_step.py)
        return cls(model, checkpoint.tokenizer, checkpoint.decode, quantize=quantize, fast_step=fast_step)

    def translate(
        self, texts: Sequence[str], settings: DecodeConfig | None = None, *, first_line: int = 1
    ) -> list[str]:
        """The best translation of each text, in input order; an empty or all-whitespace text gives ""."""
        return [translation.text for translation in self.translations(texts, settings, first_line=first_line)]

    def translations(
        self,
        texts: Sequence[str],
        settings: DecodeConfig | None = None,
        *,
        n_best: int = 1,
        attention: bool = False,
        evidence: bool = False,
        first_line: int = 1,
        sources: Sequence[list[int] | None] | None = None,
    ) -> list[Translation]:
        """The translation of each text, in input order; `EMPTY` for an empty or all-whitespace text.

        Args:
            texts: The sentences.
            settings: How to search (default: this translator's `decode`). A beam of 1 runs greedy search,
                which gives the same result as beam search with one beam.
            n_best: With n_best > 1, each translation carries its next n_best - 1 alternatives (at most
                the beam size in all).
            evidence: Also return each best translation's word alignment, confidence and warnings: one
                teacher-forced forward pass per batch (decode/evidence.py).
            attention: Also return the attention weights behind each (non-empty) translation: one more
                forward pass per sentence.
            first_line: The line number of `texts[0]` in warnings (a file translated chunk by chunk names
                its own lines).
            sources: The texts' ids from `encode`, when the caller has them already (a server counts tokens
                with them), so nothing is tokenised twice.
        """
        settings = settings or self.decode
        if sources is None:
            sources = self.encode(texts, first_line=first_line)
        results: list[Translation] = [EMPTY] * len(texts)
        pad_id, eos_id = self.model.config.pad_id, self.tokenizer.eos_id
        lengths = _lengths(texts, sources)
        for chunk in _length_batches(lengths, settings.batch_size):
            width = lengths[chunk[0]] + 1  # the longest, with EOS: sorted by decreasing length
            rows = [[*sources[i], eos_id] + [pad_id] * (width - 1 - len(sources[i])) for i in chunk]
            src = torch.tensor(rows, device=self.device)
            found = search(self.model, src, settings, n_best=n_best, fast=self.fast_step)
            translations = [self._translation(hypotheses) for hypotheses in found]
            proofs = self._evidence(chunk, texts, sources, translations, settings) if evidence else [None] * len(chunk)
            for i, translation, proof in zip(chunk, translations, proofs, strict=True):
                maps = self._attention(texts[i], sources[i], translation.tokens) if attention else None
                results[i] = replace(translation, attention=maps, evidence=proof)
        return results

    def attention(self, text: str, settings: DecodeConfig | None = None) -> TokenAttention:
        """Translate `text` (settings as for `translations`), then return the attention weights the model used.

        Raises:
            ValueError: `text` is empty.
        """
        if not text.strip():
            raise ValueError("cannot show attention for an empty text")
        return self.translations([text], settings, attention=True)[0].attention

    def trace(
        self, text: str, settings: DecodeConfig | None = None, *, top_k: int = 5, source: list[int] | None = None
    ) -> Trace:
        """Translate `text` as `translations` does and return the search step by step (decode/trace.py): every
        step's open hypotheses with their `top_k` likeliest next tokens, the candidates kept, finished and
        pruned, the finished list and the cross-attention rows; and the encoder's self-attention. `source`: the
        text's ids from `encode`, when the caller has them.

        Raises:
            ValueError: `text` is empty.
        """
        if not text.strip():
            raise ValueError("cannot trace the translation of an empty text")
        settings = settings or self.decode
        ids = self.encode([text])[0] if source is None else source
        src = torch.tensor([[*ids, self.tokenizer.eos_id]], device=self.device)  # (1, S)
        recorder = SearchRecorder(top_k=top_k, length_penalty=settings.length_penalty, eos_id=self.tokenizer.eos_id)
        best = search(self.model, src, settings, recorder=recorder)[0][0]
        with torch.inference_mode():
            _, maps = self.model.attention_maps(src, torch.tensor([[self.tokenizer.bos_id]], device=self.device))
        encoder = torch.stack([layer[0] for layer in maps.encoder]).float().cpu()  # L x (H, S, S) -> (L, H, S, S)
        text_out = self.tokenizer.decode_target(best.tokens)
        return Trace(text_out, self._source_pieces(text, ids), encoder, recorder.steps)

    def encode(self, texts: Sequence[str], *, first_line: int = 1) -> list[list[int] | None]:
        """Each text's source ids without EOS, cut to the model's `max_len - 1` positions (with a warning naming
        the line); None for an empty or all-whitespace text, which is never decoded."""
        max_len = self.model.config.max_len
        return [
            fit_source(self.tokenizer.encode_source(text), model_max_len=max_len, line=first_line + i)
            if text.strip()
            else None
            for i, text in enumerate(texts)
        ]

    def batches(self, texts: Sequence[str], sources: Sequence[list[int] | None], batch_size: int) -> list[list[int]]:
        """The indices of `texts` (with their `sources` from `encode`) in the batches `translations` decodes, in
        its order (empty texts in none).

        Translating some of these batches with the others' sources set to None decodes exactly those batches
        again (the sort is stable and every batch but the last is full): several processes can share the
        work, and each sentence is computed as one process would compute it (train/distributed.py).
        """
        return _length_batches(_lengths(texts, sources), batch_size)

    def _translation(self, hypotheses: list[Hypothesis]) -> Translation:
        """A search's hypotheses, best first, as one `Translation` carrying the others as alternatives."""
        decode = self.tokenizer.decode_target
        best, *others = (Translation(decode(h.tokens), h.tokens, h.score, h.log_prob) for h in hypotheses)
        return replace(best, alternatives=tuple(others))

    def _evidence(
        self,
        chunk: list[int],
        texts: Sequence[str],
        sources: Sequence[list[int] | None],
        translations: list[Translation],
        settings: DecodeConfig,
    ) -> list[Evidence]:
        """The evidence of one batch's best translations (`chunk`: their indices in `texts`)."""
        lengths = torch.tensor([len(sources[i]) + 1 for i in chunk])  # with EOS, as the search counted them
        limits = output_limits(lengths, model_max_len=self.model.config.max_len, decode=settings).tolist()
        sentences = [
            Sentence(
                source_text=texts[i],
                source_ids=sources[i],
                source_pieces=self.tokenizer.source_pieces(texts[i]),
                output_text=translation.text,
                output_ids=translation.tokens,
                output_pieces=self.tokenizer.target_pieces(translation.tokens),
                ended=len(translation.tokens) < limit,  # a search stopped by its limit wrote no EOS
            )
            for i, translation, limit in zip(chunk, translations, limits, strict=True)
        ]
        return gather_evidence(
            self.model, sentences, settings, bos_id=self.tokenizer.bos_id, eos_id=self.tokenizer.eos_id
        )

    def _attention(self, text: str, ids: list[int], output: list[int]) -> TokenAttention:
        """The maps of one teacher-forced forward pass over `output`, which the search found for `ids`."""
        src = torch.tensor([[*ids, self.tokenizer.eos_id]], device=self.device)  # (1, S)
        tgt = [self.tokenizer.bos_id, *output]
        with torch.inference_mode():
            _, maps = self.model.attention_maps(src, torch.tensor([tgt], device=self.device))
        return TokenAttention(self._source_pieces(text, ids), self.tokenizer.target_pieces(tgt), maps)

    def _source_pieces(self, text: str, ids: list[int]) -> list[str]:
        """The pieces of the source ids `encode` kept, and EOS: the labels of attention over the source."""
        return self.tokenizer.source_pieces(text)[: len(ids)] + self.tokenizer.target_pieces([self.tokenizer.eos_id])


def _lengths(texts: Sequence[str], sources: Sequence[list[int] | None]) -> list[int | None]:
    """Each source's length, None for a text that is not decoded (empty, or blanked with a None source)."""
    return [len(ids) if ids is not None and text.strip() else None for text, ids in zip(texts, sources, strict=True)]


def _length_batches(lengths: Sequence[int | None], batch_size: int) -> list[list[int]]:
    """Indices of the sources by their lengths (None: an empty text, in no batch), longest first,
    `batch_size` per batch."""
    order = sorted((i for i, n in enumerate(lengths) if n is not None), key=lambda i: -lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
