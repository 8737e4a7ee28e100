"""Scaled dot-product attention (Eq. 1, section 3.2.1) and multi-head attention (section 3.2.2).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,   head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)

Read in order: Eq. 1 (`reference_attention`; which kernel computes it fastest is blocks/kernels.py's concern),
the module that owns the projections (`MultiHeadAttention`), and its one body (`BoundAttention`), which every
pass runs: training and encoding over whole sequences, and decoding on a KV cache, T new positions per row.

The per-head projections W_Q_i, W_K_i, W_V_i are stored side by side as one (3D, D) matrix, the layout of
`torch.nn.MultiheadAttention.in_proj_weight`: self-attention projects Q, K and V with a single matmul,
cross-attention uses the Q rows on the decoder states and the K/V rows on the encoder memory. An inference copy
may split cross-attention's matrix into W_Q and [W_K; W_V] Linear layers (`split_cross_projections`), so that
int8 quantisation, which cannot slice a quantised matrix, covers them too.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tnmt.blocks.bound import Linear, LinearBinder, bind_linear
from tnmt.blocks.kernels import attention, attention_weights
from tnmt.blocks.kv_cache import LayerCache
from tnmt.blocks.masks import causal_mask


def reference_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Eq. 1 written out, returning the output (..., Tq, Dh) and the weights (..., Tq, Tk). `mask`: boolean
    (True = may attend) or additive, broadcastable to (..., Tq, Tk).

    Dropout on the weights is the "attention dropout" of later implementations (0 in the paper).
    """
    weights = attention_weights(q, k, mask)
    return F.dropout(weights, dropout_p) @ v, weights


class MultiHeadAttention(nn.Module):
    """H attention heads over D/H-dimensional projections, then the output projection W_O.

    The module owns the tensors; what it computes is `BoundAttention`, bound to them by `bind`. Rows: x is
    (N * T, D), N sequences of T positions each, ordered (sequence, position).
    """

    def __init__(self, d_model: int, n_heads: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.dropout = dropout
        self.in_proj = nn.Linear(d_model, 3 * d_model)  # rows: [W_Q; W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model)  # W_O
        self.q_proj: nn.Module | None = None  # W_Q and [W_K; W_V] once `split_cross_projections` ran
        self.kv_proj: nn.Module | None = None

    def split_cross_projections(self) -> None:
        """Replace the stacked in_proj by W_Q (D -> D) and [W_K; W_V] (D -> 2D) Linear layers, same values.

        For cross-attention of an inference copy (`tnmt.translate.quantize`): afterwards this module has no
        in_proj, so it cannot self-attend, and its state dict names q_proj/kv_proj instead of in_proj.
        """
        d = self.out_proj.in_features
        w, b = self.in_proj.weight.detach(), self.in_proj.bias.detach()
        self.q_proj, self.kv_proj = nn.Linear(d, d), nn.Linear(d, 2 * d)
        with torch.no_grad():
            self.q_proj.weight.copy_(w[:d]), self.q_proj.bias.copy_(b[:d])
            self.kv_proj.weight.copy_(w[d:]), self.kv_proj.bias.copy_(b[d:])
        self.in_proj = None

    def bind(self, linear: LinearBinder = bind_linear, *, cross: bool) -> "BoundAttention":
        """This attention as self- or cross-attention, bound to its tensors (blocks/bound.py): the step's
        projections by `linear`, the memory's keys/values (computed once per batch) as stored."""
        d = self.out_proj.in_features
        qkv = q = kv = None
        if not cross:
            qkv = linear(self.in_proj, None)
        elif self.q_proj is not None:  # split (an inference copy)
            q, kv = linear(self.q_proj, None), bind_linear(self.kv_proj)
        else:
            q, kv = linear(self.in_proj, slice(0, d)), bind_linear(self.in_proj, slice(d, 3 * d))
        return BoundAttention(
            qkv=qkv,
            q=q,
            kv=kv,
            out=linear(self.out_proj, None),
            heads=self.n_heads,
            d_head=self.d_head,
            dropout_p=self.dropout if self.training else 0.0,
        )

    def self_attention(
        self, x: Tensor, mask: Tensor | None = None, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """`BoundAttention.self_attention` over whole sequences x (B, T, D) -> (B, T, D), weights (B, H, T, T)."""
        b, t, d = x.shape
        out, weights = self.bind(cross=False).self_attention(
            x.reshape(b * t, d), positions=t, mask=mask, need_weights=need_weights
        )
        return out.view(b, t, d), weights

    def cross_attention(
        self, x: Tensor, memory: Tensor, mask: Tensor | None = None, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """`BoundAttention.cross_attention` of decoder states x (B, T, D) to the encoder memory (B, S, D)."""
        b, t, d = x.shape
        out, weights = self.bind(cross=True).cross_attention(
            x.reshape(b * t, d), positions=t, memory=memory, mask=mask, need_weights=need_weights
        )
        return out.view(b, t, d), weights

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-attention keys and values of the encoder memory: (B, S, D) -> 2 x (B, H, S, Dh)."""
        return self.bind(cross=True).keys_values(memory)


class BoundAttention(NamedTuple):
    """`MultiHeadAttention` as functions of its tensors (`MultiHeadAttention.bind`): the one body of attention.

    Rows are x (N * T, D), ordered (sequence, position). Without a cache (training, encoding, a teacher-forced
    pass) the T positions are whole sequences and `mask` says who sees whom. With a cache (decoding) they are T
    new positions per row: self-attention writes their keys/values after the `cache.length` held and attends
    causally; cross-attention reads the memory's keys/values from the cache, where a sentence's `cache.beams`
    consecutive rows share them."""

    qkv: Linear | None  # [W_Q; W_K; W_V]: (M, D) -> (M, 3D), for self-attention (None for cross-attention)
    q: Linear | None  # W_Q alone: (M, D) -> (M, D), for cross-attention
    kv: Linear | None  # [W_K; W_V]: (M, D) -> (M, 2D), cross-attention's keys/values of the memory
    out: Linear  # W_O
    heads: int
    d_head: int
    dropout_p: float  # attention dropout, in train mode

    def self_attention(
        self,
        x: Tensor,
        cache: LayerCache | None = None,
        *,
        positions: int,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """x (N * T, D) -> (N * T, D), and with `need_weights` the weights (N, H, T, keys): T keys without a
        cache, `cache.length` + T with one. `mask` (broadcastable to (N, H, T, T)) applies without a cache; with
        one, each new position sees the cached keys and the new ones up to itself."""
        n, t, h, dh = x.size(0) // positions, positions, self.heads, self.d_head
        qkv = self.qkv(x).view(n, t, 3 * h, dh).transpose(1, 2)  # (N * T, 3D) -> (N, 3H, T, Dh): Q, K, V heads
        q = qkv[:, :h]  # (N, H, T, Dh)
        if cache is None:
            k, v = qkv[:, h : 2 * h], qkv[:, 2 * h :]
        else:
            start, end = cache.length, cache.length + t
            cache.kv.narrow(3, start, t).copy_(qkv[:, h:].view(n, 2, h, t, dh).transpose(0, 1))  # (2, N, H, T, Dh)
            k, v = cache.k.narrow(2, 0, end), cache.v.narrow(2, 0, end)  # (N, H, L + T, Dh), views of the cache
            mask = None if t == 1 else causal_mask(t, end, device=x.device)  # one new position sees every key
        out, weights = attention(q, k, v, mask, dropout_p=self.dropout_p, need_weights=need_weights)  # (N, H, T, Dh)
        return self.out(out.transpose(1, 2).reshape(n * t, h * dh)), weights

    def cross_attention(
        self,
        x: Tensor,
        cache: LayerCache | None = None,
        *,
        positions: int,
        memory: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """x (N * T, D) -> (N * T, D), and with `need_weights` the weights (N, H, T, S). Without a cache the keys
        and values are the encoder `memory`'s (N, S, D), `mask` its padding (N, 1, 1, S); with one, the cache's.
        The queries of a sentence's `cache.beams` rows go to its keys and values together, as one
        (beams * T)-query attention per sentence."""
        n, t, h, dh = x.size(0) // positions, positions, self.heads, self.d_head
        if cache is None:
            (k, v), beams = self.keys_values(memory), 1
        else:
            k, v, mask, beams = cache.cross_k, cache.cross_v, cache.bias, cache.beams
        b, queries = n // beams, beams * positions
        q = self.q(x).view(b, queries, h, dh).transpose(1, 2)  # (B, H, beams * T, Dh)
        out, weights = attention(q, k, v, mask, dropout_p=self.dropout_p, need_weights=need_weights)
        if weights is not None:  # (B, H, beams * T, S) -> (N, H, T, S)
            weights = weights.unflatten(2, (beams, t)).transpose(1, 2).flatten(0, 1)
        return self.out(out.transpose(1, 2).reshape(n * t, h * dh)), weights

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-attention's keys and values of the encoder memory: (B, S, D) -> 2 x (B, H, S, Dh)."""
        b, s, _ = memory.shape
        kv = self.kv(memory).view(b, s, 2 * self.heads, self.d_head).transpose(1, 2)  # (B, 2H, S, Dh)
        return kv[:, : self.heads], kv[:, self.heads :]
