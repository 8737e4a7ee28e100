"""The encoder-decoder Transformer (section 3, Figure 1).

The API follows the data flow: `encode` turns source ids into memory, `decode` turns target ids and
memory into next-token logits, and `forward = decode(encode(...))`. Loss, search and metrics live
outside the model. Deviations from the paper, all optional: pre-norm (`norm_first`), learned
positions, GELU/swish activations, attention/activation dropout and a final logits bias exist for
experiments and for loading MarianMT checkpoints; the defaults are the paper's.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from tnmt.blocks.bound import LinearBinder, bind_linear, bind_norm
from tnmt.blocks.dropout import Dropout
from tnmt.blocks.embedding import TokenEmbedding
from tnmt.blocks.kv_cache import KVCache
from tnmt.blocks.layers import DecoderLayer, EncoderLayer
from tnmt.blocks.masks import padding_mask, target_mask
from tnmt.blocks.positional import PositionalEncoding
from tnmt.blocks.record import Recorder
from tnmt.config import ModelConfig


@dataclass
class AttentionMaps:
    """Attention weights of one forward pass, one (B, H, Tq, Tk) tensor per layer."""

    encoder: list[Tensor]  # (B, H, S, S)
    decoder_self: list[Tensor]  # (B, H, T, T)
    cross: list[Tensor]  # (B, H, T, S)


@dataclass(frozen=True)
class EncodedSource:
    """A right-padded batch of sources as the decoder reads it (`Transformer.encode_for_decoding`): what a search
    over the batch, and the evidence pass after it, start from, so the encoder runs once for both."""

    cross: Tensor  # (L, 2, B, H, S, Dh) every decoder layer's cross-attention keys and values
    mask: Tensor | None  # (B, 1, 1, S) True on tokens; None when no source is padded (nothing to mask)
    lengths: Tensor  # (B,) tokens per source, EOS included
    encoder_attention: list[Tensor] | None = None  # per encoder layer (B, H, S, S), when asked for

    @property
    def batch_size(self) -> int:
        return self.lengths.size(0)

    def cache(self, capacity: int) -> KVCache:
        """A fresh KV cache over these sources, one row per sentence, with room for `capacity` target positions."""
        return KVCache(self.cross, self.mask, capacity=capacity)

    def select(self, index: Tensor) -> "EncodedSource":
        """The sources at `index` (N,), in that order, a source repeated as often as it is named: a pass over
        several outputs of one sentence reads it once each, without encoding it again."""
        mask = None if self.mask is None else self.mask.index_select(0, index)
        return EncodedSource(self.cross.index_select(2, index), mask, self.lengths.index_select(0, index))


class Transformer(nn.Module):
    """Encoder-decoder Transformer for translation; see `ModelConfig` for every option.

    `activation_checkpointing = True` (a training setting, not part of the model: the loop sets it from
    `train.activation_checkpointing`) keeps only each layer's input during a training forward pass and
    recomputes the layer in backward, trading compute (43% more time per update for the base shape on an H200,
    benchmarks/NOTEBOOK.md) for activations of one layer at a time.
    `compiled_layer` (a training setting too, set by train/compiled.py from `train.compile`): a compiled
    function `(layer, *args, **kwargs) -> layer(*args, **kwargs)` that training forward passes run each layer
    through; None = eager.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = c = config
        self.activation_checkpointing = False
        self.compiled_layer: Callable[..., Any] | None = None
        layer_args = dict(
            dropout=c.dropout,
            attention_dropout=c.attention_dropout,
            activation_dropout=c.activation_dropout,
            activation=c.activation,
            norm_first=c.norm_first,
            eps=c.layer_norm_eps,
        )
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, pad_id=c.pad_id, scale=c.scale_embeddings)
        self.tgt_embed = (
            self.src_embed
            if c.share_embeddings
            else TokenEmbedding(c.tgt_vocab_size, c.d_model, pad_id=c.pad_id, scale=c.scale_embeddings)
        )
        self.positions = PositionalEncoding(c.max_len, c.d_model, kind=c.positional, layout=c.positional_layout)
        self.embed_dropout = Dropout(c.dropout)  # on the sums of embeddings and positions (section 5.4)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(c.d_model, c.n_heads, c.d_ff, **layer_args) for _ in range(c.n_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(c.d_model, c.n_heads, c.d_ff, **layer_args) for _ in range(c.n_decoder_layers)
        )
        # Pre-norm leaves the residual stream unnormalised, so each stack ends with a LayerNorm.
        self.encoder_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.norm_first else nn.Identity()
        self.output = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)  # pre-softmax projection
        if c.final_logits_bias:
            self.logits_bias = nn.Parameter(torch.zeros(c.tgt_vocab_size))
        else:
            self.register_parameter("logits_bias", None)
        self._init_weights()
        if c.tie_output:
            self.output.weight = self.tgt_embed.weight

    def _init_weights(self) -> None:
        """Xavier-uniform matrices and zero biases, as in the reference tensor2tensor/fairseq code."""
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias") and "norm" not in name:
                nn.init.zeros_(p)

    def encode(self, src_ids: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Source ids (B, S) -> memory (B, S, D). `src_mask` (B, 1, 1, S) defaults to non-pad keys."""
        return self._encode(src_ids, src_mask, need_weights=False)[0]

    def decode(
        self, tgt_ids: Tensor, memory: Tensor, *, memory_mask: Tensor | None = None, tgt_mask: Tensor | None = None
    ) -> Tensor:
        """Target ids (B, T) and memory (B, S, D) -> logits (B, T, V), every position at once (teacher forcing).

        `tgt_mask` defaults to causal + target padding. Decoding one token at a time goes through
        `incremental_decoder`.
        """
        return self._decode(tgt_ids, memory, memory_mask=memory_mask, tgt_mask=tgt_mask)[0]

    def encode_for_decoding(
        self, src_ids: Tensor, *, need_weights: bool = False, record: Recorder | None = None
    ) -> EncodedSource:
        """Encode a right-padded (B, S) source batch once for the decoder: every layer's cross-attention K/V,
        the source mask and lengths, and with `need_weights` the encoder's self-attention (a trace shows it).
        With `record`, the encoder's layers report what flows through them (blocks/record.py)."""
        src_mask = padding_mask(src_ids, self.config.pad_id)  # (B, 1, 1, S)
        memory, weights = self._encode(src_ids, src_mask, need_weights=need_weights, record=record)  # (B, S, D)
        # L x 2 x (B, H, S, Dh) -> (L, 2, B, H, S, Dh); with no decoder layer, an empty stack of that shape
        heads, d_head = self.config.n_heads, self.config.d_model // self.config.n_heads
        b, s = src_ids.shape
        kv = [torch.stack(layer.cross_attn.project_kv(memory)) for layer in self.decoder_layers]
        cross = torch.stack(kv) if kv else memory.new_empty(0, 2, b, heads, s, d_head)
        # Without padding the mask allows everything; None lets attention skip applying it at every step.
        padded = bool((~src_mask).any())
        lengths = src_mask.view(b, s).sum(dim=1)
        return EncodedSource(cross, src_mask if padded else None, lengths, weights if need_weights else None)

    def incremental_decoder(
        self,
        *,
        project: Callable[[Tensor], Tensor] | None = None,
        linear: LinearBinder = bind_linear,
        record: Recorder | None = None,
    ) -> "BoundDecoder":
        """The decoder bound to this model's tensors (blocks/bound.py), for decoding on a KV cache: a search binds
        it once and steps it to the end. `project` replaces the output projection (features (M, D) -> logits
        (M, V), bias included) and `linear` binds the layers' Linear layers: a `Translator` passes functions on
        copies of its frozen model's weights laid out for the products (translate/frozen.py). With `record`, the
        layers report what flows through them (blocks/record.py)."""
        layers = tuple(
            layer.bind(linear, record=None if record is None else partial(record, "decoder", i))
            for i, layer in enumerate(self.decoder_layers)
        )
        return self._decoder(layers, project=self.project if project is None else project, record=record)

    def _decoder(
        self, layers: tuple[Callable[..., Any], ...], *, project: Callable[[Tensor], Tensor], record: Recorder | None
    ) -> "BoundDecoder":
        final_norm = self.decoder_norm
        return BoundDecoder(
            embed=self._bind_embedding(self.tgt_embed),
            layers=layers,
            final_norm=bind_norm(final_norm) if isinstance(final_norm, nn.LayerNorm) else None,
            project=project,
            record=record,
        )

    def step(
        self,
        tgt_ids: Tensor,
        cache: KVCache,
        *,
        need_weights: bool = False,
        project: Callable[[Tensor], Tensor] | None = None,
    ) -> tuple[Tensor, list[tuple[Tensor, Tensor]] | None]:
        """One `BoundDecoder.step`, binding the decoder for it (a loop binds once: `incremental_decoder`)."""
        return self.incremental_decoder(project=project).step(tgt_ids, cache, need_weights=need_weights)

    def project(self, features: Tensor) -> Tensor:
        """The pre-softmax projection: decoder features (..., D) -> logits (..., V)."""
        logits = self.output(features)
        return logits if self.logits_bias is None else logits + self.logits_bias

    def forward(
        self,
        src_ids: Tensor,
        tgt_ids: Tensor,
        *,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        features_only: bool = False,
        cross_attention_of: int | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Teacher-forced logits (B, T, V) for target inputs (B, T) given source ids (B, S).

        `features_only`: the decoder's output (B, T, D) before the output projection, for a loss that
        applies the projection itself (train/loss.py never builds the (B, T, V) logits).
        `cross_attention_of`: a decoder layer (0 = the first) whose cross-attention weights (B, H, T, S) are
        returned too, differentiable, for a loss on them (guided alignment, train/loss.py); only that layer
        pays for writing them out. A keyword of `forward` rather than a method of its own, so that it passes
        through DistributedDataParallel, which synchronises gradients only of what its forward computed.
        """
        src_mask = padding_mask(src_ids, self.config.pad_id) if src_mask is None else src_mask
        memory = self.encode(src_ids, src_mask)
        out, _, cross = self._decode(
            tgt_ids,
            memory,
            memory_mask=src_mask,
            tgt_mask=tgt_mask,
            features_only=features_only,
            weights_of=cross_attention_of,
        )
        return out if cross_attention_of is None else (out, cross[0])

    @torch.no_grad()
    def attention_maps(self, src_ids: Tensor, tgt_ids: Tensor) -> tuple[Tensor, AttentionMaps]:
        """Logits (B, T, V) and every layer's attention weights, for inspection and pictures."""
        src_mask = padding_mask(src_ids, self.config.pad_id)
        memory, enc = self._encode(src_ids, src_mask, need_weights=True)
        logits, self_w, cross_w = self._decode(tgt_ids, memory, memory_mask=src_mask, need_weights=True)
        return logits, AttentionMaps(encoder=enc, decoder_self=self_w, cross=cross_w)

    def _encode(
        self, src_ids: Tensor, src_mask: Tensor | None, *, need_weights: bool, record: Recorder | None = None
    ) -> tuple[Tensor, list]:
        if src_mask is None:
            src_mask = padding_mask(src_ids, self.config.pad_id)
        b, s = src_ids.shape
        x = self._embed(self.src_embed, src_ids).reshape(b * s, -1)  # (B, S, D) -> rows (B * S, D)
        if record is not None:
            record("encoder", "input", x=x)
        weights = []
        for i, layer in enumerate(self.encoder_layers):
            scoped = None if record is None else partial(record, "encoder", i)
            x, w = self._layer(layer, x, positions=s, mask=src_mask, need_weights=need_weights, record=scoped)
            weights.append(w)
        return self.encoder_norm(x).view(b, s, -1), weights

    def _decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor,
        *,
        memory_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        need_weights: bool = False,
        features_only: bool = False,
        weights_of: int | None = None,
    ):
        """Teacher-forced logits (B, T, V) (or features (B, T, D)), and the attention weights of every layer
        (`need_weights`) or of layer `weights_of` alone: the bound decoder's one body, its layers called as modules
        (`_layer`), without a cache."""
        if tgt_mask is None:
            tgt_mask = target_mask(tgt_ids, self.config.pad_id)
        layers = tuple(partial(self._layer, layer) for layer in self.decoder_layers)
        decoder = self._decoder(layers, project=self.project, record=None)
        features, weights = decoder.features(
            tgt_ids,
            memory=memory,
            self_mask=tgt_mask,
            memory_mask=memory_mask,
            need_weights=need_weights,
            weights_of=weights_of,
        )
        present = [w for w in weights if w is not None]
        self_w, cross_w = [w[0] for w in present], [w[1] for w in present]
        features = features.view(*tgt_ids.shape, -1)  # (B, T, D)
        if features_only:
            return features, self_w, cross_w
        return self.project(features), self_w, cross_w  # (B, T, V)

    def _embed(self, embedding: TokenEmbedding, ids: Tensor) -> Tensor:
        """Token embeddings plus positions, dropped out in train mode: ids (B, T) -> (B, T, D)."""
        return self._bind_embedding(embedding)(ids, 0)

    def _bind_embedding(self, embedding: TokenEmbedding) -> Callable[[Tensor, int], Tensor]:
        """`_embed` from a first position, bound to its tensors (blocks/bound.py): ids (N, T), start -> (N, T, D)."""
        embed, rows = embedding.bind(), self.positions.rows
        dropout = self.embed_dropout if self.training else None

        def embed_from(ids: Tensor, start: int) -> Tensor:
            x = embed(ids, rows(start, ids.size(1)))
            return x if dropout is None else dropout(x)

        return embed_from

    def _layer(self, layer: nn.Module, *args, **kwargs):
        """Run one encoder or decoder layer; in a training forward pass through `compiled_layer` when set, and
        through `torch.utils.checkpoint` when activation checkpointing is on."""
        if not (self.training and torch.is_grad_enabled()):
            return layer(*args, **kwargs)
        if self.compiled_layer is not None:
            layer = partial(self.compiled_layer, layer)
        if self.activation_checkpointing:
            return checkpoint(layer, *args, use_reentrant=False, **kwargs)
        return layer(*args, **kwargs)


class BoundDecoder(NamedTuple):
    """The decoder stack bound to a model's tensors (`Transformer.incremental_decoder`): its one loop. Greedy and
    beam search feed each row's newest token on a KV cache (T = 1), the evidence pass and a look inside a whole
    output (T = its length) on a fresh cache over the search's sources; the new positions' keys/values join the
    cache, which counts them. Training runs the same loop without a cache, its layers called as modules
    (`Transformer._decode`)."""

    embed: Callable[[Tensor, int], Tensor]  # ids (N, T) from a first position -> (N, T, D)
    layers: tuple[Callable[..., Any], ...]  # `BoundDecoderLayer`s, or the modules (whose forward binds them)
    final_norm: Callable[[Tensor], Tensor] | None  # pre-norm's LayerNorm after the stack
    project: Callable[[Tensor], Tensor]  # features (M, D) -> logits (M, V)
    record: Recorder | None = None  # told the stack's input (blocks/record.py)

    def step(
        self, tgt_ids: Tensor, cache: KVCache, *, need_weights: bool = False
    ) -> tuple[Tensor, list[tuple[Tensor, Tensor]] | None]:
        """The decoder on T new positions per row, after the `cache.length` it holds: ids (N, T) -> logits
        (N, T, V), and with `need_weights` each layer's (self-attention (N, H, T, length + T), cross-attention
        (N, H, T, S)) weights."""
        features, weights = self.features(tgt_ids, cache, need_weights=need_weights)
        return self.project(features).view(*tgt_ids.shape, -1), weights if need_weights else None  # (N, T, V)

    def features(
        self,
        tgt_ids: Tensor,
        cache: KVCache | None = None,
        *,
        memory: Tensor | None = None,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        need_weights: bool = False,
        weights_of: int | None = None,
        layers: int | None = None,
    ) -> tuple[Tensor, list[tuple[Tensor, Tensor] | None]]:
        """The stack up to the decoder's output features (N * T, D), rows ordered (row, position), before the
        output projection, and each layer's weights (None where not asked: `need_weights` asks every layer,
        `weights_of` one). With a cache, the T positions follow the `cache.length` it holds; without, they are
        whole sequences over `memory` (N, S, D), masked by `self_mask` and `memory_mask`. With `layers`, only
        through the first `layers` decoder layers (their output, no final norm): what reads a middle layer's
        attention needs nothing after it."""
        n, t = tgt_ids.shape
        start = 0
        if cache is not None:
            cache.reserve(t)
            start = cache.length
        x = self.embed(tgt_ids, start).view(n * t, -1)
        if self.record is not None:
            self.record("decoder", "input", x=x)
        weights = []
        for i, layer in enumerate(self.layers[:layers]):
            x, w = layer(
                x,
                None if cache is None else cache.layer(i),
                positions=t,
                memory=memory,
                self_mask=self_mask,
                memory_mask=memory_mask,
                need_weights=need_weights or i == weights_of,
            )
            weights.append(w)
        if cache is not None:
            cache.advance(t)
        if layers is None and self.final_norm is not None:
            x = self.final_norm(x)
        return x, weights
