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
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from tnmt.blocks.dropout import Dropout
from tnmt.blocks.embedding import TokenEmbedding
from tnmt.blocks.kv_cache import KVCache, LayerKV
from tnmt.blocks.layers import DecoderLayer, EncoderLayer
from tnmt.blocks.masks import causal_mask, padding_mask, target_mask
from tnmt.blocks.positional import PositionalEncoding
from tnmt.config import ModelConfig


@dataclass
class AttentionMaps:
    """Attention weights of one forward pass, one (B, H, Tq, Tk) tensor per layer."""

    encoder: list[Tensor]  # (B, H, S, S)
    decoder_self: list[Tensor]  # (B, H, T, T)
    cross: list[Tensor]  # (B, H, T, S)


class Transformer(nn.Module):
    """Encoder-decoder Transformer for translation; see `ModelConfig` for every option.

    `activation_checkpointing = True` (a training setting, not part of the model: the loop sets it from
    `train.activation_checkpointing`) keeps only each layer's input during a training forward pass and
    recomputes the layer in backward, trading ~1/3 more compute for activations of one layer at a time.
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
        self,
        tgt_ids: Tensor,
        memory: Tensor | None,
        *,
        memory_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Target ids (B, T) and memory (B, S, D) -> logits (B, T, V).

        Without a cache, `tgt_mask` defaults to causal + target padding. With a cache (from
        `init_cache`), `tgt_ids` are only the new positions, memory and masks come from the cache,
        and the cache grows by T positions.
        """
        return self._decode(tgt_ids, memory, memory_mask=memory_mask, tgt_mask=tgt_mask, cache=cache)[0]

    def decode_with_attention(self, tgt_ids: Tensor, cache: KVCache) -> tuple[Tensor, list[Tensor]]:
        """`decode` on a cache, also returning every layer's cross-attention weights (B, H, T, S) of the new
        positions: what a step-by-step view of the search shows (decode/trace.py)."""
        logits, _, cross = self._decode(tgt_ids, None, cache=cache, need_weights=True)
        return logits, cross

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

    def init_cache(self, memory: Tensor, memory_mask: Tensor | None) -> KVCache:
        """A KV cache for incremental decoding, with every layer's cross-attention K/V computed once.

        Raises:
            ValueError: The model has no decoder layers (see `KVCache`).
        """
        layers = [LayerKV(*layer.cross_attn.project_kv(memory)) for layer in self.decoder_layers]
        return KVCache(layers=layers, memory_mask=memory_mask)

    def _encode(self, src_ids: Tensor, src_mask: Tensor | None, *, need_weights: bool) -> tuple[Tensor, list]:
        if src_mask is None:
            src_mask = padding_mask(src_ids, self.config.pad_id)
        x = self.embed_dropout(self.positions(self.src_embed(src_ids)))  # (B, S, D)
        weights = []
        for layer in self.encoder_layers:
            x, w = self._layer(layer, x, src_mask, need_weights=need_weights)
            weights.append(w)
        return self.encoder_norm(x), weights

    def _decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor | None,
        *,
        memory_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
        features_only: bool = False,
        weights_of: int | None = None,
    ):
        """Logits (or features), and the attention weights of every layer (`need_weights`) or of layer
        `weights_of` alone."""
        start = 0  # positions already decoded: the offset of positional encodings and of the causal mask
        if cache is not None:
            start, memory_mask = cache.length, cache.memory_mask  # read before the layers append to it
            # A single new query may see every cached key; a block of them needs the shifted causal mask.
            if tgt_mask is None and tgt_ids.size(1) > 1:
                tgt_mask = causal_mask(tgt_ids.size(1), start + tgt_ids.size(1), device=tgt_ids.device)
        elif tgt_mask is None:
            tgt_mask = target_mask(tgt_ids, self.config.pad_id)
        x = self.embed_dropout(self.positions(self.tgt_embed(tgt_ids), start=start))  # (B, T, D)
        self_w, cross_w = [], []
        for i, layer in enumerate(self.decoder_layers):
            x, w = self._layer(
                layer,
                x,
                memory,
                self_mask=tgt_mask,
                memory_mask=memory_mask,
                cache=None if cache is None else cache.layers[i],
                need_weights=need_weights or i == weights_of,
            )
            if w is not None:
                self_w.append(w[0])
                cross_w.append(w[1])
        features = self.decoder_norm(x)  # (B, T, D)
        if features_only:
            return features, self_w, cross_w
        logits = self.output(features)  # (B, T, V)
        if self.logits_bias is not None:
            logits = logits + self.logits_bias
        return logits, self_w, cross_w

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
