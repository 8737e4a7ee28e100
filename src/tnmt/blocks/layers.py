"""Encoder and decoder layers (section 3.1, Figure 1).

Every sub-layer is wrapped as LayerNorm(x + Dropout(Sublayer(x))): residual connection, dropout on the
sub-layer output (section 5.4), then layer normalisation ("post-norm", the paper's order). With
`norm_first` the order becomes x + Dropout(Sublayer(LayerNorm(x))) ("pre-norm", which trains more
stably for deep stacks); the stacks then end with a final LayerNorm (see model.py).
"""

from collections.abc import Callable
from typing import NamedTuple, TypeVar

from torch import Tensor, nn

from tnmt.blocks.attention import AttentionStep, MultiHeadAttention
from tnmt.blocks.bound import LinearBinder, bind_linear, bind_norm
from tnmt.blocks.dropout import Dropout
from tnmt.blocks.feed_forward import FeedForward
from tnmt.blocks.kv_cache import LayerCache

W = TypeVar("W")  # what a sub-layer returns beside its output: attention weights, or None


class Residual(nn.Module):
    """Residual connection + dropout + LayerNorm around one sub-layer, post- or pre-norm."""

    def __init__(self, d_model: int, *, dropout: float, norm_first: bool, eps: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], tuple[Tensor, W]]) -> tuple[Tensor, W]:
        """x (..., D) -> (..., D), and what `sublayer` returns beside its output (attention weights or None)."""
        block = self.bind()
        out, extra = sublayer(block.inner(x))
        return block.add(x, out), extra

    def bind(self) -> "ResidualStep":
        """This block bound to its LayerNorm's tensors (blocks/bound.py): what `forward` and a decoder step run."""
        return ResidualStep(bind_norm(self.norm), self.norm_first, self.dropout if self.training else None)


class ResidualStep(NamedTuple):
    """`Residual` as functions of its tensors (`Residual.bind`), in two halves around the sub-layer."""

    norm: Callable[[Tensor], Tensor]  # the LayerNorm
    norm_first: bool
    dropout: Callable[[Tensor], Tensor] | None  # residual dropout, in train mode

    def inner(self, x: Tensor) -> Tensor:
        """What the sub-layer reads: LayerNorm(x) for pre-norm, x itself for post-norm."""
        return self.norm(x) if self.norm_first else x

    def add(self, x: Tensor, out: Tensor) -> Tensor:
        """The residual sum of x and the sub-layer's output: x + Dropout(out), then LayerNorm for post-norm."""
        if self.dropout is not None:
            out = self.dropout(out)
        return x + out if self.norm_first else self.norm(x + out)


class EncoderLayer(nn.Module):
    """Self-attention over the source, then the feed-forward network."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        *,
        dropout: float,
        attention_dropout: float,
        activation_dropout: float,
        activation: str,
        norm_first: bool,
        eps: float,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=attention_dropout)
        self.ffn = FeedForward(d_model, d_ff, activation=activation, dropout=activation_dropout)
        self.attn_block = Residual(d_model, dropout=dropout, norm_first=norm_first, eps=eps)
        self.ffn_block = Residual(d_model, dropout=dropout, norm_first=norm_first, eps=eps)

    def forward(self, x: Tensor, mask: Tensor | None, *, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x (B, S, D), mask (B, 1, 1, S) -> (B, S, D) and optionally weights (B, H, S, S)."""
        x, weights = self.attn_block(x, lambda h: self.self_attn.self_attention(h, mask, need_weights=need_weights))
        x, _ = self.ffn_block(x, lambda h: (self.ffn(h), None))
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder memory, then the feed-forward network."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        *,
        dropout: float,
        attention_dropout: float,
        activation_dropout: float,
        activation: str,
        norm_first: bool,
        eps: float,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=attention_dropout)
        self.ffn = FeedForward(d_model, d_ff, activation=activation, dropout=activation_dropout)
        self.self_block = Residual(d_model, dropout=dropout, norm_first=norm_first, eps=eps)
        self.cross_block = Residual(d_model, dropout=dropout, norm_first=norm_first, eps=eps)
        self.ffn_block = Residual(d_model, dropout=dropout, norm_first=norm_first, eps=eps)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        self_mask: Tensor | None,
        memory_mask: Tensor | None,
        need_weights: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """x (B, T, D) -> (B, T, D) and optionally (self weights (B, H, T, T), cross weights (B, H, T, S))."""
        x, self_weights = self.self_block(
            x, lambda h: self.self_attn.self_attention(h, self_mask, need_weights=need_weights)
        )
        x, cross_weights = self.cross_block(
            x, lambda h: self.cross_attn.cross_attention(h, memory, memory_mask, need_weights=need_weights)
        )
        x, _ = self.ffn_block(x, lambda h: (self.ffn(h), None))
        return x, (self_weights, cross_weights) if need_weights else None

    def bind(self, linear: LinearBinder = bind_linear) -> "DecoderLayerStep":
        """This layer for a decoder step on a KV cache, bound to its tensors once per search, its Linear layers by
        `linear` (blocks/bound.py)."""
        return DecoderLayerStep(
            self.self_attn.bind(linear, cross=False),
            self.cross_attn.bind(linear, cross=True),
            self.ffn.bind(linear),
            (self.self_block.bind(), self.cross_block.bind(), self.ffn_block.bind()),
        )


class DecoderLayerStep(NamedTuple):
    """`DecoderLayer.forward` of T new positions per row on a KV cache (`DecoderLayer.bind`), the one way tnmt
    decodes incrementally (`Transformer.incremental_decoder`): the same sub-layers and residual blocks, bound."""

    self_attn: AttentionStep
    cross_attn: AttentionStep
    ffn: Callable[[Tensor], Tensor]
    blocks: tuple[ResidualStep, ResidualStep, ResidualStep]  # around self-attention, cross-attention, FFN

    def __call__(
        self, x: Tensor, cache: LayerCache, *, positions: int, need_weights: bool = False
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """x (N * T, D), rows ordered (row, position), -> (N * T, D), and with `need_weights` (self weights
        (N, H, T, length + T), cross weights (N, H, T, S))."""
        self_block, cross_block, ffn_block = self.blocks
        out, self_weights = self.self_attn.self_attention(
            self_block.inner(x), cache, positions=positions, need_weights=need_weights
        )
        x = self_block.add(x, out)
        out, cross_weights = self.cross_attn.cross_attention(
            cross_block.inner(x), cache, positions=positions, need_weights=need_weights
        )
        x = cross_block.add(x, out)
        x = ffn_block.add(x, self.ffn(ffn_block.inner(x)))
        return x, (self_weights, cross_weights) if need_weights else None
