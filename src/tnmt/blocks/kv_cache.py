"""The key/value cache that makes autoregressive decoding one decoder step per token.

At inference the decoder's self-attention keys/values of past positions never change (they are
causally masked from the future), so each step only computes the new position's K/V and appends it.
The cross-attention K/V depend only on the encoder memory and are computed once per sentence.
The cache is an explicit object that the caller creates (`Transformer.init_cache`), passes to every
`Transformer.decode` call and reorders for beam search: no hidden state lives on the modules.
"""

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class LayerKV:
    """Keys/values of one decoder layer. Self-attention buffers grow; cross-attention ones are fixed."""

    cross_k: Tensor  # (B, H, S, Dh)
    cross_v: Tensor  # (B, H, S, Dh)
    self_k: Tensor | None = None  # (B, H, capacity, Dh); positions >= KVCache.length are unused
    self_v: Tensor | None = None
    spare: tuple[Tensor, Tensor] | None = None  # buffers of self_k/self_v's shape that `select` fills next

    def append(self, k: Tensor, v: Tensor, start: int) -> tuple[Tensor, Tensor]:
        """Write new keys/values (B, H, t, Dh) at positions start..start+t; return all (B, H, start+t, Dh)."""
        end = start + k.size(2)
        if self.self_k is None or end > self.self_k.size(2):
            self._grow(k, end)
        self.self_k[:, :, start:end] = k
        self.self_v[:, :, start:end] = v
        return self.self_k[:, :, :end], self.self_v[:, :, :end]

    def _grow(self, like: Tensor, needed: int) -> None:
        # Preallocate in chunks so a step is a copy of one position, not a concatenation of all.
        capacity = max(needed, 2 * (0 if self.self_k is None else self.self_k.size(2)), 32)
        b, h, _, dh = like.shape
        new_k = like.new_empty(b, h, capacity, dh)
        new_v = like.new_empty(b, h, capacity, dh)
        if self.self_k is not None:
            old = self.self_k.size(2)
            new_k[:, :, :old] = self.self_k
            new_v[:, :, :old] = self.self_v
        self.self_k, self.self_v = new_k, new_v

    def select(self, indices: Tensor, length: int) -> None:
        """Keep rows `indices` of the self-attention keys/values, copying only the `length` filled positions.

        Beam search reorders every step, so the copy goes into a spare pair of buffers that are swapped
        with the current ones instead of allocating: fresh memory costs page faults on every step.
        """
        if self.self_k is None:
            return
        if self.self_k.requires_grad:  # autograd cannot follow out=; only decoding outside no_grad gets here
            self.self_k, self.self_v = self.self_k.index_select(0, indices), self.self_v.index_select(0, indices)
            return
        n, rest = indices.numel(), self.self_k.shape[1:]
        if self.spare is None or self.spare[0].size(0) < n or self.spare[0].shape[1:] != rest:
            self.spare = (self.self_k.new_empty(n, *rest), self.self_v.new_empty(n, *rest))
        new_k, new_v = self.spare[0][:n], self.spare[1][:n]
        torch.index_select(self.self_k[:, :, :length], 0, indices, out=new_k[:, :, :length])
        torch.index_select(self.self_v[:, :, :length], 0, indices, out=new_v[:, :, :length])
        self.spare = (self.self_k, self.self_v)
        self.self_k, self.self_v = new_k, new_v


@dataclass
class KVCache:
    """Per-layer keys/values plus the source padding mask, for one batch of hypotheses."""

    layers: list[LayerKV]
    memory_mask: Tensor | None  # (B, 1, 1, S) or None when the source has no padding
    length: int = 0  # number of target positions already decoded

    @property
    def batch_size(self) -> int:
        return self.layers[0].cross_k.size(0)

    def reorder(self, indices: Tensor, *, same_sources: bool = False) -> None:
        """Keep rows `indices` (a LongTensor of batch positions), e.g. the surviving beams' parents.

        Rows may repeat (two beams sharing a parent) and the batch may shrink (finished sentences).
        `same_sources=True` promises that every row i keeps a row with the same source sentence (beam
        search reordering among the beams of each sentence, none removed): the cross-attention K/V and
        the memory mask are then unchanged and are not copied.
        """
        for layer in self.layers:
            layer.select(indices, self.length)
            if not same_sources:
                layer.cross_k = layer.cross_k.index_select(0, indices)
                layer.cross_v = layer.cross_v.index_select(0, indices)
        if self.memory_mask is not None and not same_sources:
            self.memory_mask = self.memory_mask.index_select(0, indices)

    def repeat_interleave(self, n: int) -> None:
        """Repeat every sentence n times in place (B -> B * n), e.g. to start n beams per sentence."""
        self.reorder(torch.arange(self.batch_size, device=self.layers[0].cross_k.device).repeat_interleave(n))
