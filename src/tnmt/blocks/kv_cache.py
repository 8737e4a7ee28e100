"""The key/value cache that makes autoregressive decoding one decoder step per token.

At inference the decoder's self-attention keys/values of past positions never change (they are
causally masked from the future), so each step only computes the new position's K/V and appends it.
The cross-attention K/V depend only on the encoder memory and are computed once per sentence.
The cache is an explicit object that the caller creates (`Transformer.init_cache`), passes to every
`Transformer.decode` call and reorders for beam search: no hidden state lives on the modules.

The cache owns its write position: each `LayerKV` counts the positions it holds, `append` writes after
them and advances the count, and `KVCache.length` reads it. Nobody threads a start index through the
layers or bumps a counter beside them, so the count cannot drift from the keys/values actually stored.
The model reads `cache.length` before a decode call, as the offset of the positional encodings and of
the causal mask.

Beam search keeps K hypotheses per sentence, all attending to the same encoder memory. The cache keeps
the cross-attention K/V once per sentence and knows that every `beams` consecutive rows belong to one
sentence, so cross-attention reads each sentence's K/V once for all its beams instead of once per beam
(and a reorder within the beams copies nothing of them).
"""

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class LayerKV:
    """Keys/values of one decoder layer. Self-attention buffers grow; cross-attention ones are fixed.

    Rows are hypotheses: N = B * beams, the `beams` consecutive rows b * beams ... b * beams + beams - 1
    all continuing source sentence b.
    """

    cross_k: Tensor  # (B, H, S, Dh) one per source sentence
    cross_v: Tensor  # (B, H, S, Dh)
    beams: int = 1  # consecutive rows per source sentence
    self_k: Tensor | None = None  # (N, H, capacity, Dh); positions >= length are unused
    self_v: Tensor | None = None
    length: int = 0  # positions of self_k/self_v written so far
    spare: tuple[Tensor, Tensor] | None = None  # buffers of self_k/self_v's shape that `select` fills next

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write new keys/values (B, H, T, Dh) after the `length` held ones; return all (B, H, length, Dh)."""
        start, end = self.length, self.length + k.size(2)
        if self.self_k is None or end > self.self_k.size(2):
            self._grow(k, end)
        self.self_k[:, :, start:end] = k
        self.self_v[:, :, start:end] = v
        self.length = end
        return self.self_k[:, :, :end], self.self_v[:, :, :end]

    def _grow(self, like: Tensor, needed: int) -> None:
        # Preallocate in chunks so a step is a copy of one position, not a concatenation of all.
        capacity = max(needed, 2 * (0 if self.self_k is None else self.self_k.size(2)), 32)
        b, h, _, dh = like.shape
        new_k = like.new_empty(b, h, capacity, dh)
        new_v = like.new_empty(b, h, capacity, dh)
        if self.self_k is not None:
            new_k[:, :, : self.length] = self.self_k[:, :, : self.length]
            new_v[:, :, : self.length] = self.self_v[:, :, : self.length]
        self.self_k, self.self_v = new_k, new_v

    def select(self, indices: Tensor) -> None:
        """Keep rows `indices` of the self-attention keys/values, copying only the `length` filled positions.

        Beam search reorders every step, so the copy goes into a spare pair of buffers that are swapped
        with the current ones instead of allocating: fresh memory costs page faults on every step.
        The length is unchanged: every kept row holds the same positions.
        """
        if self.self_k is None:
            return
        if self.self_k.requires_grad:  # autograd cannot follow out=; only decoding outside no_grad gets here
            self.self_k, self.self_v = self.self_k.index_select(0, indices), self.self_v.index_select(0, indices)
            return
        n, rest, length = indices.numel(), self.self_k.shape[1:], self.length
        if self.spare is None or self.spare[0].size(0) < n or self.spare[0].shape[1:] != rest:
            self.spare = (self.self_k.new_empty(n, *rest), self.self_v.new_empty(n, *rest))
        new_k, new_v = self.spare[0][:n], self.spare[1][:n]
        torch.index_select(self.self_k[:, :, :length], 0, indices, out=new_k[:, :, :length])
        torch.index_select(self.self_v[:, :, :length], 0, indices, out=new_v[:, :, :length])
        self.spare = (self.self_k, self.self_v)
        self.self_k, self.self_v = new_k, new_v


@dataclass
class KVCache:
    """Per-layer keys/values plus the source padding mask, for one batch of hypotheses.

    Raises:
        ValueError: `layers` is empty. A decoder without layers has no keys/values, so the cache would
            have nothing to count decoded positions with; decode such a model without a cache.
    """

    layers: list[LayerKV]
    memory_mask: Tensor | None  # (B, 1, 1, S) per source sentence, or None when the source has no padding

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError(
                "a KV cache needs at least one decoder layer (n_decoder_layers=0 has no keys/values to cache); "
                "decode such a model without a cache, feeding the whole prefix"
            )

    @property
    def length(self) -> int:
        """Target positions decoded so far; every layer appends the same number per decode call."""
        return self.layers[0].length

    @property
    def beams(self) -> int:
        """Consecutive rows (hypotheses) per source sentence."""
        return self.layers[0].beams

    @property
    def batch_size(self) -> int:
        """Rows: hypotheses being decoded."""
        return self.layers[0].cross_k.size(0) * self.beams

    def reorder(self, indices: Tensor, *, same_sources: bool = False) -> None:
        """Keep rows `indices` (a LongTensor of row positions), e.g. the surviving beams' parents.

        Rows may repeat (two beams sharing a parent) and the batch may shrink (finished sentences), but
        each run of `beams` consecutive new rows must come from one sentence: its first row names the
        sentence whose cross-attention K/V and mask are kept. `same_sources=True` promises more: row i
        keeps a row of its own sentence and no sentence leaves (beam search reordering among the beams of
        each sentence), so the cross-attention K/V and the memory mask are not touched at all.

        Raises:
            ValueError: a run of `beams` rows mixes sentences.
        """
        for layer in self.layers:
            layer.select(indices)
        if same_sources:
            return
        rows = indices.view(-1, self.beams)  # (B', beams)
        sentences = rows[:, 0] // self.beams  # (B',)
        if self.beams > 1 and not bool((rows // self.beams == sentences[:, None]).all()):
            raise ValueError(f"each run of {self.beams} rows must continue one sentence")
        for layer in self.layers:
            layer.cross_k = layer.cross_k.index_select(0, sentences)
            layer.cross_v = layer.cross_v.index_select(0, sentences)
        if self.memory_mask is not None:
            self.memory_mask = self.memory_mask.index_select(0, sentences)

    def start_beams(self, n: int) -> None:
        """Make every row n consecutive rows continuing the same sentence (N -> N * n), e.g. n beams."""
        rows = torch.arange(self.batch_size, device=self.layers[0].cross_k.device).repeat_interleave(n)
        for layer in self.layers:
            layer.select(rows)
            layer.beams *= n
