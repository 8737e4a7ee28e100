"""Encoder and decoder layers (section 3.1, Figure 1).

Every sub-layer is wrapped as LayerNorm(x + Dropout(Sublayer(x))): residual connection, dropout on the
sub-layer output (section 5.4), then layer normalisation ("post-norm", the paper's order). With
`norm_first` the order becomes x + Dropout(Sublayer(LayerNorm(x))) ("pre-norm", which trains more
stably for deep stacks); the stacks then end with a final LayerNorm (see model.py).

Each layer's `forward` is its bound body applied (`BoundEncoderLayer`, `BoundDecoderLayer`, which read like
Figure 1): the same code trains, encodes, and decodes on a KV cache. Rows: x is (N * T, D), N sequences of T
positions, ordered (sequence, position); a decoder step has T = 1.
"""

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple, TypeVar

from torch import Tensor, nn

from tnmt.blocks.attention import BoundAttention, MultiHeadAttention
from tnmt.blocks.bound import LinearBinder, bind_linear, bind_norm
from tnmt.blocks.dropout import Dropout
from tnmt.blocks.feed_forward import FeedForward
from tnmt.blocks.kv_cache import LayerCache
from tnmt.blocks.record import Recorder

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
        read = block.inner(x)
        out, extra = sublayer(read)
        return block.add(x, read, out), extra

    def bind(self, record: Recorder | None = None) -> "BoundResidual":
        """This block bound to its LayerNorm's tensors (blocks/bound.py), reporting to `record` if given."""
        dropout = self.dropout if self.training else None
        return BoundResidual(bind_norm(self.norm), self.norm_first, dropout, record)


class BoundResidual(NamedTuple):
    """`Residual` as functions of its tensors (`Residual.bind`), in two halves around the sub-layer."""

    norm: Callable[[Tensor], Tensor]  # the LayerNorm
    norm_first: bool
    dropout: Callable[[Tensor], Tensor] | None  # residual dropout, in train mode
    record: Recorder | None  # told (stream, read, update, out) of each pass, for a view of the inside

    def inner(self, x: Tensor) -> Tensor:
        """What the sub-layer reads: LayerNorm(x) for pre-norm, x itself for post-norm."""
        return self.norm(x) if self.norm_first else x

    def add(self, x: Tensor, read: Tensor, out: Tensor) -> Tensor:
        """The residual sum of x and the sub-layer's output `out` (of `read`, what it read): x + Dropout(out),
        then LayerNorm for post-norm."""
        summed = x + (out if self.dropout is None else self.dropout(out))
        result = summed if self.norm_first else self.norm(summed)
        if self.record is not None:
            self.record(stream=x, read=read, update=out, out=result)
        return result


def _scoped(record: Recorder | None, *where: str | int) -> Recorder | None:
    return None if record is None else partial(record, *where)


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

    def forward(
        self,
        x: Tensor,
        *,
        positions: int,
        mask: Tensor | None,
        need_weights: bool = False,
        record: Recorder | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """`BoundEncoderLayer` applied: x (B * S, D), mask (B, 1, 1, S) -> (B * S, D), weights (B, H, S, S)."""
        return self.bind(record=record)(x, positions=positions, mask=mask, need_weights=need_weights)

    def bind(self, *, record: Recorder | None = None) -> "BoundEncoderLayer":
        """This layer bound to its tensors (blocks/bound.py), its sub-layers reporting to `record` if given."""
        return BoundEncoderLayer(
            self.self_attn.bind(cross=False),
            self.ffn.bind(record=_scoped(record, "hidden units")),
            (
                self.attn_block.bind(_scoped(record, "self-attention")),
                self.ffn_block.bind(_scoped(record, "feed-forward")),
            ),
        )


class BoundEncoderLayer(NamedTuple):
    """`EncoderLayer` as functions of its tensors (`EncoderLayer.bind`)."""

    self_attn: BoundAttention
    ffn: Callable[[Tensor], Tensor]
    blocks: tuple[BoundResidual, BoundResidual]  # around self-attention, FFN

    def __call__(
        self, x: Tensor, *, positions: int, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (B * S, D) -> (B * S, D) and with `need_weights` the self-attention weights (B, H, S, S)."""
        attn_block, ffn_block = self.blocks
        read = attn_block.inner(x)
        out, weights = self.self_attn.self_attention(read, positions=positions, mask=mask, need_weights=need_weights)
        x = attn_block.add(x, read, out)
        read = ffn_block.inner(x)
        return ffn_block.add(x, read, self.ffn(read)), weights


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
        self, x: Tensor, cache: LayerCache | None = None, **kwargs: Any
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """`BoundDecoderLayer` applied: its arguments (`positions`, `memory`, the masks, `need_weights`) and its
        results. Training calls it through the module (activation checkpointing and `torch.compile` see modules)."""
        return self.bind()(x, cache, **kwargs)

    def bind(self, linear: LinearBinder = bind_linear, *, record: Recorder | None = None) -> "BoundDecoderLayer":
        """This layer bound to its tensors (blocks/bound.py), its Linear layers by `linear`, its sub-layers
        reporting to `record` if given: what `forward` runs, and what a search binds once and steps."""
        return BoundDecoderLayer(
            self.self_attn.bind(linear, cross=False),
            self.cross_attn.bind(linear, cross=True),
            self.ffn.bind(linear, record=_scoped(record, "hidden units")),
            (
                self.self_block.bind(_scoped(record, "masked self-attention")),
                self.cross_block.bind(_scoped(record, "cross-attention")),
                self.ffn_block.bind(_scoped(record, "feed-forward")),
            ),
        )


class BoundDecoderLayer(NamedTuple):
    """`DecoderLayer` as functions of its tensors (`DecoderLayer.bind`): Figure 1's decoder layer, on whole
    target sequences (teacher forcing, `memory` given) or on T new positions per row of a KV cache."""

    self_attn: BoundAttention
    cross_attn: BoundAttention
    ffn: Callable[[Tensor], Tensor]
    blocks: tuple[BoundResidual, BoundResidual, BoundResidual]  # around self-attention, cross-attention, FFN

    def __call__(
        self,
        x: Tensor,
        cache: LayerCache | None = None,
        *,
        positions: int,
        memory: Tensor | None = None,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """x (N * T, D) -> (N * T, D), and with `need_weights` (self weights (N, H, T, keys), cross weights
        (N, H, T, S)). Without a cache: `memory` (N, S, D) with `memory_mask`, and `self_mask` (causal and
        padding, (N, 1, T, T)); with one, the cache holds both (`BoundAttention`)."""
        self_block, cross_block, ffn_block = self.blocks
        read = self_block.inner(x)
        out, self_weights = self.self_attn.self_attention(
            read, cache, positions=positions, mask=self_mask, need_weights=need_weights
        )
        x = self_block.add(x, read, out)
        read = cross_block.inner(x)
        out, cross_weights = self.cross_attn.cross_attention(
            read, cache, positions=positions, memory=memory, mask=memory_mask, need_weights=need_weights
        )
        x = cross_block.add(x, read, out)
        read = ffn_block.inner(x)
        x = ffn_block.add(x, read, self.ffn(read))
        return x, (self_weights, cross_weights) if need_weights else None
