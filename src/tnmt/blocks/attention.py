"""Scaled dot-product attention (Eq. 1, section 3.2.1) and multi-head attention (section 3.2.2).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,   head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)

The per-head projections W_Q_i, W_K_i, W_V_i are stored side by side as one (3D, D) matrix, the layout
of `torch.nn.MultiheadAttention.in_proj_weight`: self-attention projects Q, K and V with a single matmul,
cross-attention uses the Q rows on the decoder states and the K/V rows on the encoder memory. An
inference copy may split cross-attention's matrix into W_Q and [W_K; W_V] Linear layers
(`split_cross_projections`), so that int8 quantisation, which cannot slice a quantised matrix, covers
them too.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tnmt.blocks.kv_cache import LayerKV


def reference_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Eq. 1 written out, returning the output (..., Tq, Dh) and the weights (..., Tq, Tk).

    Dividing by sqrt(d_k) keeps the dot products' variance near 1 so the softmax does not saturate.
    Dropout on the weights is the "attention dropout" of later implementations (0 in the paper).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return F.dropout(weights, dropout_p) @ v, weights


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Eq. 1 through PyTorch's fused kernel, or written out when that is faster or the weights are wanted.

    On CPU, PyTorch's fused (flash) kernel is 5-9x slower than the written-out version for a bf16
    forward + backward pass at translation lengths (17 to 100 positions, measured with torch 2.13 for
    benchmarks/train_speed.py), so half-precision training takes the written-out path; the
    (B, H, Tq, Tk) weights it materialises are small at those lengths. fp32 and inference keep the kernel.
    """
    slow_fused_backward = q.device.type == "cpu" and q.dtype != torch.float32 and q.requires_grad
    if need_weights or slow_fused_backward:
        out, weights = reference_attention(q, k, v, mask, dropout_p=dropout_p)
        return out, weights if need_weights else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None


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
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        cache: LayerKV | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Every position of x (B, T, D) attends to the positions of x that `mask` allows.

        With a cache holding L earlier positions, x holds only the T new ones: the cache appends their
        keys/values after its own and the queries attend over all L + T positions (`mask` is then
        (.., T, L + T) or None).
        """
        q, k, v = self.in_proj(x).chunk(3, dim=-1)  # 3 x (B, T, D)
        q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, L + T, Dh)
        return self._attend(q, k, v, mask, need_weights)

    def cross_attention(
        self,
        x: Tensor,
        memory: Tensor | None,
        mask: Tensor | None = None,
        *,
        cache: LayerKV | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Decoder states x (N, T, D) attend to the encoder memory (B, S, D), or to its cached K/V.

        N = B, or with a cache of several beams per sentence N = B * beams: the queries of a sentence's
        beams then go to its keys/values together, as one (beams * T)-query attention per sentence.
        """
        d = self.out_proj.in_features
        n, t, _ = x.shape
        beams = cache.beams if cache is not None else 1
        if self.q_proj is not None:
            q = self.q_proj(x)
        else:
            q = F.linear(x, self.in_proj.weight[:d], self.in_proj.bias[:d])
        q = self._split_heads(q.view(n // beams, beams * t, d))  # (B, H, beams * T, Dh)
        k, v = (cache.cross_k, cache.cross_v) if cache is not None else self.project_kv(memory)
        out, weights = self._attend(q, k, v, mask, need_weights)  # (B, beams * T, D)
        if weights is not None:  # (B, H, beams * T, S) -> (N, H, T, S)
            weights = weights.unflatten(2, (beams, t)).transpose(1, 2).flatten(0, 1)
        return out.view(n, t, d), weights

    def _attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        dropout_p = self.dropout if self.training else 0.0
        out, weights = attention(q, k, v, mask, dropout_p=dropout_p, need_weights=need_weights)
        b, h, t, dh = out.shape
        out = out.transpose(1, 2).reshape(b, t, h * dh)  # (B, H, Tq, Dh) -> (B, Tq, D)
        return self.out_proj(out), weights
