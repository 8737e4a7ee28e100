"""Scaled dot-product attention (Eq. 1, section 3.2.1) and multi-head attention (section 3.2.2).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,   head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)

The per-head projections W_Q_i, W_K_i, W_V_i are stored side by side as one (3D, D) matrix, the layout
of `torch.nn.MultiheadAttention.in_proj_weight`: self-attention projects Q, K and V with a single matmul,
cross-attention uses the Q rows on the decoder states and the K/V rows on the encoder memory. An
inference copy may split cross-attention's matrix into W_Q and [W_K; W_V] Linear layers
(`split_cross_projections`), so that int8 quantisation, which cannot slice a quantised matrix, covers
them too.

Decoding runs the same attention on a KV cache, T new positions per row (`AttentionStep`, from
`MultiHeadAttention.bind`): the projections bound to their tensors once per search (blocks/bound.py).
"""

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tnmt.blocks.bound import Linear, LinearBinder, bind_linear
from tnmt.blocks.kv_cache import LayerCache
from tnmt.blocks.masks import additive_mask, causal_mask


def reference_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Eq. 1 written out, returning the output (..., Tq, Dh) and the weights (..., Tq, Tk).

    Dropout on the weights is the "attention dropout" of later implementations (0 in the paper).
    """
    weights = attention_weights(q, k, mask)
    return F.dropout(weights, dropout_p) @ v, weights


def attention_weights(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)): (..., Tq, Dh) and (..., Tk, Dh) -> (..., Tq, Tk).

    Dividing by sqrt(d_k) keeps the dot products' variance near 1 so the softmax does not saturate.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return scores.softmax(dim=-1)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Eq. 1 on (B, H, Tq, Dh) queries and (B, H, Tk, Dh) keys/values, by whichever way is fastest here; the
    output (B, H, Tq, Dh) and, with `need_weights`, the weights (B, H, Tq, Tk). `mask`: boolean (True = may
    attend) or additive (0 or -inf, `masks.additive_mask`), broadcastable to (B, H, Tq, Tk).

    - Written out (`reference_attention`) for half-precision training on CPU: there PyTorch's fused (flash)
      kernel is 5-9x slower for a bf16 forward + backward pass at translation lengths (17 to 100 positions,
      torch 2.13, benchmarks/speed/train_speed.py); the (B, H, Tq, Tk) weights it materialises are small there.
    - As two batched products and a softmax (`batched_attention`) when decoding on CPU with a few queries in
      many groups (`BATCHED_MIN_GROUPS`): the fused CPU kernel is tiled for long sequences, and with one
      or a few queries per group it costs 1.3x that at batch 64 (198 against 154 us, 4 heads, 20 keys;
      benchmarks/speed/step_ops.py), while with a handful of groups (batch 1) its single call is cheaper (14
      against 33 us).
    - Otherwise through the fused kernel.

    Asking for the weights never changes the output: they are computed beside it (`attention_weights`, before
    dropout), so a traced or explained translation is the plain one, to the last bit.
    """
    # (the cheapest checks first, arguments by position: a decoder step makes 8 calls, ~1 us of checks each)
    if q.requires_grad:
        if q.dtype != torch.float32 and q.is_cpu:
            out, weights = reference_attention(q, k, v, mask, dropout_p=dropout_p)
            return out, weights if need_weights else None
    elif (
        dropout_p == 0.0
        and q.size(2) <= BATCHED_MAX_QUERIES
        and q.size(0) * q.size(1) >= BATCHED_MIN_GROUPS
        and q.is_cpu
    ):
        return batched_attention(q, k, v, mask), attention_weights(q, k, mask) if need_weights else None
    out = F.scaled_dot_product_attention(q, k, v, mask, dropout_p)
    return out, attention_weights(q, k, mask) if need_weights else None


BATCHED_MIN_GROUPS = 16  # groups (B x H) from which decoding on CPU takes `batched_attention`
BATCHED_MAX_QUERIES = 8  # queries per group up to which it does: a decoder step has one per beam


def batched_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """Eq. 1 as `torch.bmm` over the G = B x H groups: (B, H, Tq, Dh) -> (B, H, Tq, Dh), no weights returned."""
    b, h, tq, dh = q.shape
    q, k, v = q.reshape(b * h, tq, dh), k.flatten(0, 1), v.flatten(0, 1)  # k, v: views of the cache
    if mask is None:
        scores = torch.bmm(q, k.transpose(1, 2)).mul_(dh**-0.5)  # (G, Tq, Tk)
    else:
        if mask.dtype == torch.bool:
            mask = additive_mask(mask, q.dtype)
        bias = mask.expand(b, h, -1, -1).reshape(b * h, mask.size(2), mask.size(3))  # a view when not broadcast
        scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=dh**-0.5)
    return torch.bmm(softmax_rows(scores), v).view(b, h, tq, dh)


SHORT_ROW = 16  # keys per row below which `softmax_rows` works across the rows
ACROSS_MIN_ROWS = 128  # rows from which it does


def softmax_rows(scores: Tensor) -> Tensor:
    """`scores.softmax(dim=-1)` for (..., Tk) scores on CPU, across the rows when they are short.

    Why: PyTorch's CPU softmax over the last dimension is vectorised along that dimension, and a row shorter than
    one vector (16 floats with AVX-512) takes scalar code: 256 rows of 14 keys (4 heads x 64 sentences of 13
    tokens and EOS, the cross-attention of a Multi30k batch) cost 82 us, against 18 us for the kernel over the
    first dimension of the transposed view, which is vectorised across the rows (AMX Xeon, torch 2.13,
    benchmarks/speed/step_ops.py); the copy back to rows costs less than the batched product would lose on the
    transposed layout (41 us for both, against 89 us for the plain softmax and the product). From 16 keys the
    last-dimension kernel is the faster.
    """
    tk = scores.size(-1)
    rows = scores.numel() // tk
    if tk >= SHORT_ROW or rows < ACROSS_MIN_ROWS or not scores.is_cpu:
        return scores.softmax(dim=-1)
    return scores.reshape(rows, tk).t().softmax(dim=0).t().contiguous().view(scores.shape)


class MultiHeadAttention(nn.Module):
    """H attention heads over D/H-dimensional projections, then the output projection W_O."""

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

        For cross-attention of an inference copy (`tnmt.decode.quantize`): afterwards this module has no
        in_proj, so it cannot self-attend, and its state dict names q_proj/kv_proj instead of in_proj.
        """
        d = self.out_proj.in_features
        w, b = self.in_proj.weight.detach(), self.in_proj.bias.detach()
        self.q_proj, self.kv_proj = nn.Linear(d, d), nn.Linear(d, 2 * d)
        with torch.no_grad():
            self.q_proj.weight.copy_(w[:d]), self.q_proj.bias.copy_(b[:d])
            self.kv_proj.weight.copy_(w[d:]), self.kv_proj.bias.copy_(b[d:])
        self.in_proj = None

    def _split_heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_head).transpose(1, 2)  # (B, T, D) -> (B, H, T, Dh)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-attention keys and values of the encoder memory: (B, S, D) -> 2 x (B, H, S, Dh)."""
        d = self.out_proj.in_features
        if self.kv_proj is not None:
            kv = self.kv_proj(memory)  # (B, S, 2D)
        else:
            kv = F.linear(memory, self.in_proj.weight[d:], self.in_proj.bias[d:])
        k, v = kv.chunk(2, dim=-1)
        return self._split_heads(k), self._split_heads(v)

    def self_attention(
        self, x: Tensor, mask: Tensor | None = None, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Every position of x (B, T, D) attends to the positions of x that `mask` allows."""
        q, k, v = self.in_proj(x).chunk(3, dim=-1)  # 3 x (B, T, D)
        return self._attend(self._split_heads(q), self._split_heads(k), self._split_heads(v), mask, need_weights)

    def cross_attention(
        self, x: Tensor, memory: Tensor, mask: Tensor | None = None, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Decoder states x (B, T, D) attend to the encoder memory (B, S, D)."""
        k, v = self.project_kv(memory)
        return self._attend(self._split_heads(self.query_projection()(x)), k, v, mask, need_weights)

    def query_projection(self, linear: LinearBinder = bind_linear) -> Linear:
        """Cross-attention's W_Q as a function: the first D rows of the stacked in_proj, or q_proj once split."""
        if self.q_proj is not None:
            return linear(self.q_proj, None)
        return linear(self.in_proj, slice(0, self.out_proj.in_features))

    def bind(self, linear: LinearBinder = bind_linear, *, cross: bool) -> "AttentionStep":
        """This attention for a decoder step on a KV cache, as self-attention or as cross-attention, bound to its
        tensors once per search by `linear` (blocks/bound.py): only the projections that attention uses."""
        return AttentionStep(
            qkv=None if cross else linear(self.in_proj, None),
            q=self.query_projection(linear) if cross else None,
            out=linear(self.out_proj, None),
            heads=self.n_heads,
            d_head=self.d_head,
            dropout_p=self.dropout if self.training else 0.0,
        )

    def _attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        dropout_p = self.dropout if self.training else 0.0  # attention dropout
        out, weights = attention(q, k, v, mask, dropout_p=dropout_p, need_weights=need_weights)
        b, h, t, dh = out.shape
        out = out.transpose(1, 2).reshape(b, t, h * dh)  # (B, H, Tq, Dh) -> (B, Tq, D)
        return self.out_proj(out), weights


class AttentionStep(NamedTuple):
    """`MultiHeadAttention` for T new positions per row of a KV cache (`MultiHeadAttention.bind`): its
    projections bound to its tensors, so that a step reads no module attribute (blocks/bound.py).

    Rows are hypotheses, x (N * T, D) ordered (row, position); a sentence's `cache.beams` consecutive rows share
    its cross-attention keys and values."""

    qkv: Linear | None  # [W_Q; W_K; W_V]: (M, D) -> (M, 3D), for self-attention (None for cross-attention)
    q: Linear | None  # W_Q alone: (M, D) -> (M, D), for cross-attention (None for self-attention)
    out: Linear  # W_O
    heads: int
    d_head: int
    dropout_p: float  # attention dropout, in train mode

    def self_attention(
        self, x: Tensor, cache: LayerCache, *, positions: int, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """`MultiHeadAttention.self_attention` of the new positions: x (N * T, D) -> (N * T, D), and with
        `need_weights` the weights (N, H, T, length + T). Their keys/values join the cache after the
        `cache.length` held, and each new position attends to those and to the new ones up to itself."""
        n, t, h, dh = x.size(0) // positions, positions, self.heads, self.d_head
        start, end = cache.length, cache.length + t
        qkv = self.qkv(x).view(n, t, 3 * h, dh).transpose(1, 2)  # (N * T, 3D) -> (N, 3H, T, Dh): Q, K, V heads
        cache.kv.narrow(3, start, t).copy_(qkv[:, h:].view(n, 2, h, t, dh).transpose(0, 1))  # (2, N, H, T, Dh)
        k, v = cache.k.narrow(2, 0, end), cache.v.narrow(2, 0, end)  # (N, H, L + T, Dh), views of the cache
        q = qkv[:, :h]  # (N, H, T, Dh)
        mask = None if t == 1 else causal_mask(t, end, device=x.device)  # one new position sees every key
        out, weights = attention(q, k, v, mask, dropout_p=self.dropout_p, need_weights=need_weights)  # (N, H, T, Dh)
        return self.out(out.transpose(1, 2).reshape(n * t, h * dh)), weights

    def cross_attention(
        self, x: Tensor, cache: LayerCache, *, positions: int, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """`MultiHeadAttention.cross_attention` of the new positions: x (N * T, D) -> (N * T, D), and with
        `need_weights` the weights (N, H, T, S). The queries of a sentence's `cache.beams` rows go to its keys and
        values together, as one (beams * T)-query attention per sentence."""
        n, t, h, dh = x.size(0) // positions, positions, self.heads, self.d_head
        b, queries = n // cache.beams, cache.beams * positions
        q = self.q(x).view(b, queries, h, dh).transpose(1, 2)  # (B, H, beams * T, Dh)
        out, weights = attention(
            q, cache.cross_k, cache.cross_v, cache.bias, dropout_p=self.dropout_p, need_weights=need_weights
        )
        if weights is not None:  # (B, H, beams * T, S) -> (N, H, T, S)
            weights = weights.unflatten(2, (cache.beams, t)).transpose(1, 2).flatten(0, 1)
        return self.out(out.transpose(1, 2).reshape(n * t, h * dh)), weights
