"""The key/value cache that makes autoregressive decoding one decoder step per token.

At inference the decoder's self-attention keys/values of past positions never change (they are
causally masked from the future), so each step only computes the new positions' K/V and writes them after
the others. The cross-attention K/V depend only on the encoder memory and are computed once per batch
(`Transformer.encode_for_decoding`). The cache is an explicit object that the caller creates, passes to
every step (`BoundDecoder.step`) and reorders for beam search: no hidden state lives on the modules.

Layout: every layer's self-attention keys and values live in one tensor (L, 2, N, H, capacity, Dh),
preallocated for the positions the search may write (it doubles if a caller goes past them), so a step
writes its new K and V with one copy per layer and allocates nothing, and a beam reorder or a shrinking
batch is one `index_select` for all layers at once, into a spare buffer that is then swapped in. The
cross-attention K/V of every layer sit in one (L, 2, B, H, S, Dh) tensor per batch of sources.

Rows are hypotheses. Beam search keeps K of them per sentence, all attending to the same source: the
`beams` consecutive rows b * beams ... b * beams + beams - 1 continue sentence b, which keeps its
cross-attention K/V once; cross-attention reads them once for all its beams (`LayerCache.beams`), and a
reorder among the beams of each sentence copies nothing of them.

The cache owns its write position: `length` counts the positions written, the step reads it
as the offset of the positional encodings and of the causal mask, and `advance` moves it once all layers
have written. Per-layer views (`layer`) are made once per (re)allocation, not at every step: indexing a
6-d tensor from Python costs more than a layer's matrix product at batch 1.
"""

from typing import NamedTuple

import torch
from torch import Tensor

from tnmt.blocks.masks import additive_mask


class LayerCache(NamedTuple):
    """One decoder layer's views into a `KVCache`, what its step reads and writes."""

    kv: Tensor  # (2, N, H, capacity, Dh) self-attention keys and values, written at [length, length + T)
    k: Tensor  # (N, H, capacity, Dh) the keys of `kv`, a view
    v: Tensor  # (N, H, capacity, Dh) its values, a view
    cross_k: Tensor  # (B, H, S, Dh)
    cross_v: Tensor  # (B, H, S, Dh)
    bias: Tensor | None  # (B, H, 1, S) additive source mask (-inf on padding), or None without padding
    length: int  # positions written before this step
    beams: int  # consecutive rows per source sentence


class KVCache:
    """Every decoder layer's keys/values for a batch of hypotheses; see the module docstring."""

    def __init__(self, cross: Tensor, mask: Tensor | None, *, capacity: int) -> None:
        """A cache over a batch of sources, given every layer's cross-attention keys and values (L, 2, B, H, S, Dh)
        and the source mask (B, 1, 1, S) (None: no padding), for up to `capacity` target positions (more grow
        it) and one row per sentence."""
        layers, _, batch, heads, _, d_head = cross.shape
        self.beams = 1
        self.length = 0
        self.spare: Tensor | None = None  # a buffer of `kv`'s shape that `reorder` fills next
        self._set_cross(cross, mask)
        self._set_kv(cross.new_empty(layers, 2, batch, heads, max(capacity, 1), d_head))

    @property
    def batch_size(self) -> int:
        """Rows: hypotheses being decoded."""
        return self.kv.size(2)

    @property
    def capacity(self) -> int:
        return self.kv.size(4)

    def layer(self, i: int) -> LayerCache:
        """Decoder layer i's views, for a step writing after the `length` positions held."""
        (kv, k, v), (cross_k, cross_v) = self._kv_views[i], self._cross_views[i]
        return LayerCache(kv, k, v, cross_k, cross_v, self._bias, self.length, self.beams)

    def reserve(self, positions: int) -> None:
        """Make room for `positions` more positions, doubling the capacity as often as needed: a caller that
        decodes past the length it asked for still gets right answers."""
        needed = self.length + positions
        if needed <= self.capacity:
            return
        capacity = self.capacity
        while capacity < needed:
            capacity *= 2
        grown = self.kv.new_empty(*self.kv.shape[:4], capacity, self.kv.size(5))
        grown[..., : self.length, :] = self.kv[..., : self.length, :]
        self.spare = None
        self._set_kv(grown)

    def advance(self, positions: int) -> None:
        """Count `positions` more as written: every layer wrote them (`BoundDecoder.step`)."""
        self.length += positions

    def reorder(self, indices: Tensor, *, same_sources: bool = False) -> None:
        """Keep rows `indices` (a LongTensor of row positions), e.g. the surviving beams' parents.

        Rows may repeat (two beams sharing a parent) and the batch may shrink (finished sentences), but
        each run of `beams` consecutive new rows must come from one sentence: its first row names the
        sentence whose cross-attention K/V and mask are kept. `same_sources=True` promises more: row i
        keeps a row of its own sentence and no sentence leaves (beam search reordering among the beams of
        each sentence), so the cross-attention K/V and the source mask are not touched at all.

        Raises:
            ValueError: a run of `beams` rows mixes sentences.
        """
        n, shape = indices.numel(), self.kv.shape
        if self.spare is None or self.spare.size(2) < n or self.spare.shape[3:] != shape[3:]:
            self.spare = self.kv.new_empty(*shape[:2], n, *shape[3:])
        new = self.spare[:, :, :n]
        torch.index_select(self.kv[..., : self.length, :], 2, indices, out=new[..., : self.length, :])
        self.spare = self.kv
        self._set_kv(new)
        if same_sources:
            return
        rows = indices.view(-1, self.beams)  # (B', beams)
        sentences = rows[:, 0] // self.beams  # (B',)
        if self.beams > 1 and not bool((rows // self.beams == sentences[:, None]).all()):
            raise ValueError(f"each run of {self.beams} rows must continue one sentence")
        mask = None if self._mask is None else self._mask.index_select(0, sentences)
        self._set_cross(self.cross.index_select(2, sentences), mask)

    def start_beams(self, n: int) -> None:
        """Make every row n consecutive rows continuing the same sentence (N -> N * n), e.g. n beams. Only the
        positions written are copied: beam search starts its beams on an empty cache (a copy of all the capacity
        cost 4% of a beam-4 search at batch 16)."""
        shape = self.kv.shape
        kv = self.kv.new_empty(*shape[:2], shape[2] * n, *shape[3:])
        kv[..., : self.length, :] = self.kv[..., : self.length, :].repeat_interleave(n, dim=2)
        self._set_kv(kv)
        self.beams *= n
        self.spare = None

    def _set_kv(self, kv: Tensor) -> None:
        self.kv = kv  # (L, 2, N, H, capacity, Dh)
        # L x (2, N, H, capacity, Dh); views by `select`, which (unlike unbind's) may be written in place with
        # autograd on
        self._kv_views = [(kv[i], kv[i, 0], kv[i, 1]) for i in range(kv.size(0))]

    def _set_cross(self, cross: Tensor, mask: Tensor | None) -> None:
        self.cross = cross  # (L, 2, B, H, S, Dh)
        self._mask = mask  # (B, 1, 1, S) bool
        self._cross_views = [layer.unbind(0) for layer in cross.unbind(0)]  # L x 2 x (B, H, S, Dh)
        # expanded over the heads once here, not at every step (the batched products take no broadcasting)
        heads = cross.size(3)
        self._bias = None if mask is None else additive_mask(mask, cross.dtype).expand(-1, heads, -1, -1).contiguous()
