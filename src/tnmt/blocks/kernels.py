"""How Eq. 1 is computed here: the kernel choice behind `MultiHeadAttention` (blocks/attention.py).

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V has one meaning and three ways to run on a CPU, each the fastest
somewhere (timings: benchmarks/speed/step_ops.py and train_speed.py): PyTorch's fused kernel, two batched products
around a softmax for decoder steps, and the formula written out for half-precision training. `attention` picks one
per call; every way gives the same output, and asking for the weights never changes it. blocks/attention.py
states Eq. 1 itself (`reference_attention`), what the tests hold every way to.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from tnmt.blocks.masks import additive_mask


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

    - Written out (`attention_weights`, then the product with V) for half-precision training on CPU: there
      PyTorch's fused (flash)
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
            weights = attention_weights(q, k, mask)
            return F.dropout(weights, dropout_p) @ v, weights if need_weights else None
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
