"""A decoder step without per-call overhead: the same arithmetic as `Transformer.decode` on a KV cache, in a
few dozen tensor calls.

Why: at translation sizes a decoder step is tiny (d_model 128, batch 1: about 2 MFLOP, ~0.1 ms of
arithmetic on one core), so its time goes to calling operators rather than computing them. Through the
modules a step makes ~650 ATen calls (module dispatch, `linear` -> `t` + `addmm`, per-layer views, masks,
cache appends; `benchmarks/profile_step.py`), each a few microseconds. This step reads the model's own
parameter tensors and writes the arithmetic out directly:

- one static cache tensor for all layers' self-attention keys and values, (L, 2, N, H, capacity, Dh),
  preallocated to the search's length limit: a step writes its new K and V with one copy per layer, and a
  beam reorder or a shrinking batch is one `index_select` for all layers at once (into a spare buffer, so a
  step allocates nothing);
- the cross-attention K/V of every layer in one (L, 2, B, H, S, Dh) tensor, computed once per batch and
  read by a sentence's beams together, as `KVCache` does;
- Q/K/V of self-attention in one matrix product (the stacked in_proj), the embedding scale folded into the
  positional add, no mask where no position is padding, attention as batched products where there are
  many groups (`_attend`), and the output projection from copies of its weights laid out for the product
  (`_output`).

`StaticCache` answers to what the searches ask of a `KVCache` (`length`, `beams`, `batch_size`, `reorder`,
`start_beams`) and `step` replaces `Transformer.decode`, so greedy and beam search run either unchanged
(`decode/step.py` picks). Models it does not cover (no decoder layers, or not a `Transformer`) and traced
searches, which need attention weights, keep the module path. Tests pin it to the module path and to
recomputing the prefix.
"""

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tnmt.blocks.feed_forward import ACTIVATIONS
from tnmt.blocks.masks import padding_mask
from tnmt.model import Transformer

Linear = Callable[[Tensor], Tensor]  # (..., in) -> (..., out)


def _linear(module: nn.Module) -> Linear:
    """A float Linear as `F.linear` on its own tensors (no module dispatch); anything else (torch.ao's dynamic
    int8 Linear) through its forward."""
    if type(module) is nn.Linear:
        weight, bias = module.weight, module.bias
        return lambda x: F.linear(x, weight, bias)
    return module.forward


def _slice_linear(weight: Tensor, bias: Tensor, rows: slice) -> Linear:
    """Rows `rows` of a stacked projection (cross-attention's W_Q of its [W_Q; W_K; W_V]), as views."""
    w, b = weight[rows], bias[rows]
    return lambda x: F.linear(x, w, b)


@dataclass(frozen=True)
class _Norm:
    """A LayerNorm's parameters, applied without module dispatch."""

    weight: Tensor
    bias: Tensor
    eps: float

    @classmethod
    def of(cls, module: nn.LayerNorm) -> "_Norm":
        return cls(module.weight, module.bias, module.eps)

    def __call__(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


@dataclass(frozen=True)
class _Layer:
    """One decoder layer's projections and norms, in the order a step uses them."""

    self_qkv: Linear  # (N, D) -> (N, 3D): [Q; K; V] of self-attention
    self_out: Linear
    cross_q: Linear
    cross_out: Linear
    ffn_in: Linear
    ffn_out: Linear
    norms: tuple[_Norm, _Norm, _Norm]  # after (post-norm) or before (pre-norm) each sub-layer


def _attend(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None) -> Tensor:
    """Attention of G = B x H groups: q (1, G, Q, Dh), k and v (1, G, T, Dh), additive bias (1, G, 1, T) or
    None -> (1, G, Q, Dh). One leading dimension because the fused CPU kernel takes 4-d inputs only (given
    3-d ones it takes a slow composite path).

    Why not always `scaled_dot_product_attention`: its CPU kernel is tiled for long sequences, and with one
    or a few queries per group it costs 1.3x two batched products and a softmax at batch 64 (198 against
    154 us, 4 heads, 20 keys; `benchmarks/step_ops.py`); with a handful of groups (batch 1) its single call
    is cheaper than three (14 against 33 us).
    """
    if q.size(1) < BMM_GROUPS:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    q, k, v, scale = q[0], k[0], v[0], q.size(-1) ** -0.5
    if bias is None:
        scores = torch.bmm(q, k.transpose(1, 2)).mul_(scale)  # (G, Q, T)
    else:
        scores = torch.baddbmm(bias[0], q, k.transpose(1, 2), alpha=scale)
    return torch.bmm(scores.softmax(dim=-1), v)[None]  # (1, G, Q, Dh)


BMM_GROUPS = 16  # groups (hypotheses x heads) from which `_attend` takes the batched products
PACKED_MIN_ROWS = 2  # rows from which the output projection takes oneDNN's packed weights (`_output`)


# Per frozen output Linear: kind -> ((storage, version) of the weights copied, the copy). Weak keys: a model that
# goes takes its copies along (the values hold no reference to the module).
_FROZEN_COPIES: "weakref.WeakKeyDictionary[nn.Module, dict[str, tuple[tuple, Tensor]]]" = weakref.WeakKeyDictionary()


def _output(module: nn.Module) -> Linear:
    """The output projection (N, D) -> (N, V): for a float CPU Linear from copies of its weights laid out for
    the product at hand, for anything else (int8, another device or dtype, no oneDNN) as it is.

    Why: the (V, D) output projection is the largest product of a step, and MKL's on the weights as stored is
    the slowest way to it on the host measured (AMD EPYC, 8000 x 128, `benchmarks/step_ops.py`). At one row
    the weights come from memory, not cache, and MKL streams a contiguous (D, V) transpose 3x faster than the
    (V, D) matrix (180 against 568 us); from 2 rows oneDNN's product on a prepacked copy is 1.5-2.3x faster
    than MKL's (64 rows: 3772 against 5513 us). Each copy is 4 bytes per weight, made on first use.

    Frozen weights (requires_grad False: a `Translator` that loaded its own model) keep their copies across
    searches, made again only if the weights change (other storage or a moved version counter: in place,
    `.to()`, a loaded state dict; not a `.data` swap back to earlier storage, so freeze only weights that
    nothing swaps). Trainable ones get fresh copies per search, because training changes them
    in ways neither tells: the moving average swaps `.data` in and out (train/ema.py), which brings back
    earlier storage under an unchanged counter.
    """
    weight, bias = module.weight, module.bias
    usable = type(module) is nn.Linear and weight.device.type == "cpu" and weight.dtype == torch.float32
    if not usable or not torch.backends.mkldnn.is_available():
        return _linear(module)
    searched: dict[str, tuple[tuple, Tensor]] = {}  # this search's copies

    def copy(kind: str) -> Tensor:
        frozen = not weight.requires_grad and not weight.is_inference()  # (an inference tensor has no version)
        store = _FROZEN_COPIES.setdefault(module, {}) if frozen else searched
        what = (weight.data_ptr(), weight._version if frozen else 0)
        if (entry := store.get(kind)) is None or entry[0] != what:
            w = weight.detach()
            made = w.t().contiguous() if kind == "transposed" else torch.ops.mkldnn._reorder_linear_weight(w, 64)
            entry = store[kind] = (what, made)
        return entry[1]

    def project(x: Tensor) -> Tensor:
        if x.size(0) < PACKED_MIN_ROWS:
            transposed = copy("transposed")  # (D, V)
            return torch.mm(x, transposed) if bias is None else torch.addmm(bias, x, transposed)
        return torch.ops.mkldnn._linear_pointwise(x, copy("packed"), bias, "none", [], "")

    return project


class FastDecoder:
    """A model's decoder as plain functions of its tensors, built per search (a fraction of a millisecond), so it
    always sees the model as it is now: trained further, moved, converted or quantised."""

    def __init__(self, model: Transformer) -> None:
        c = model.config
        self.model = model
        self.d, self.heads, self.pad_id = c.d_model, c.n_heads, c.pad_id
        self.norm_first = c.norm_first
        self.activation = ACTIVATIONS[c.activation]
        embed = model.tgt_embed
        self.embedding, self.scale = embed.weight, embed.scale  # (V, D)
        positions = model.positions
        self.positions = positions.learned.weight if positions.learned is not None else positions.table  # (P, D)
        self.layers = [self._layer(layer) for layer in model.decoder_layers]
        self.final_norm = _Norm.of(model.decoder_norm) if isinstance(model.decoder_norm, nn.LayerNorm) else None
        self.output = _output(model.output)
        self.logits_bias = model.logits_bias

    @staticmethod
    def supports(model: Transformer) -> bool:
        """Whether the step covers `model`: a `Transformer` with decoder layers (without any there are no
        keys/values to cache, see `KVCache`); anything else that decodes like one keeps its own `decode`."""
        return isinstance(model, Transformer) and model.config.n_decoder_layers > 0

    def _layer(self, layer: nn.Module) -> _Layer:
        cross = layer.cross_attn
        if cross.q_proj is not None:  # split for int8 (decode/quantize.py)
            cross_q = _linear(cross.q_proj)
        else:
            cross_q = _slice_linear(cross.in_proj.weight, cross.in_proj.bias, slice(0, self.d))
        return _Layer(
            self_qkv=_linear(layer.self_attn.in_proj),
            self_out=_linear(layer.self_attn.out_proj),
            cross_q=cross_q,
            cross_out=_linear(cross.out_proj),
            ffn_in=_linear(layer.ffn.linear1),
            ffn_out=_linear(layer.ffn.linear2),
            norms=(
                _Norm.of(layer.self_block.norm),
                _Norm.of(layer.cross_block.norm),
                _Norm.of(layer.ffn_block.norm),
            ),
        )

    def start(self, src_ids: Tensor, *, capacity: int) -> "StaticCache":
        """Encode a right-padded (B, S) batch and return a cache for up to `capacity` target positions."""
        src_mask = padding_mask(src_ids, self.pad_id)  # (B, 1, 1, S)
        memory = self.model.encode(src_ids, src_mask)  # (B, S, D)
        cross = torch.stack(  # L x 2 x (B, H, S, Dh) -> (L, 2, B, H, S, Dh)
            [torch.stack(layer.cross_attn.project_kv(memory)) for layer in self.model.decoder_layers]
        )
        bias = None  # without padding nothing is masked, and no bias is added at every step
        if bool((~src_mask).any()):  # (B, H, 1, S): 0 where a key is a token, -inf where it is padding
            b, s = src_ids.shape
            bias = memory.new_zeros(b, 1, 1, s).masked_fill_(~src_mask, float("-inf")).expand(-1, self.heads, -1, -1)
        return StaticCache(self, cross, None if bias is None else bias.contiguous(), capacity=capacity)


class StaticCache:
    """Keys/values of a batch of hypotheses in preallocated tensors, and the step that reads and extends them.

    Rows are hypotheses: N = B * beams, the `beams` consecutive rows of a sentence sharing its cross K/V.
    Each layer's views into the tensors are made once per (re)allocation, not at every step: indexing a
    6-d tensor from Python costs ~15 us a time, more than a layer's matrix product at batch 1 (12 us).
    """

    def __init__(self, decoder: FastDecoder, cross: Tensor, memory_bias: Tensor | None, *, capacity: int) -> None:
        self.decoder = decoder
        self.beams = 1
        self.length = 0  # target positions written
        self.spare: Tensor | None = None  # a buffer of kv's shape that `reorder` fills next
        layers, _, b, heads, _, dh = cross.shape
        self._set_cross(cross, memory_bias)
        self._set_kv(cross.new_empty(layers, 2, b, heads, max(capacity, 1), dh))

    def _set_kv(self, kv: Tensor) -> None:
        self.kv = kv  # (L, 2, N, H, capacity, Dh)
        # per layer: (2, N, H, capacity, Dh) to write a position into, (1, N * H, capacity, Dh) K and V to read
        self.self_views = [(layer, *layer.flatten(1, 2)[:, None].unbind(0)) for layer in kv.unbind(0)]

    def _set_cross(self, cross: Tensor, memory_bias: Tensor | None) -> None:
        self.cross = cross  # (L, 2, B, H, S, Dh)
        self.memory_bias = memory_bias  # (B, H, 1, S) additive, or None
        # per layer: K and V as (1, B * H, S, Dh)
        self.cross_views = [tuple(layer.flatten(1, 2)[:, None].unbind(0)) for layer in cross.unbind(0)]
        self.bias = None if memory_bias is None else memory_bias.flatten(0, 1)[None]  # (1, B * H, 1, S)

    @property
    def batch_size(self) -> int:
        """Rows: hypotheses being decoded."""
        return self.kv.size(2)

    def start_beams(self, n: int) -> None:
        """Make every row n consecutive rows continuing the same sentence (N -> N * n), e.g. n beams."""
        self._set_kv(self.kv.repeat_interleave(n, dim=2))
        self.beams *= n
        self.spare = None

    def reorder(self, indices: Tensor, *, same_sources: bool = False) -> None:
        """Keep rows `indices`, with `KVCache.reorder`'s contract: each run of `beams` new rows continues one
        sentence, and `same_sources` promises no sentence leaves (so the cross K/V stay as they are)."""
        n, length, shape = indices.numel(), self.length, self.kv.shape
        if self.spare is None or self.spare.size(2) < n or self.spare.shape[3:] != shape[3:]:
            self.spare = self.kv.new_empty(*shape[:2], n, *shape[3:])
        new = self.spare[:, :, :n]
        torch.index_select(self.kv[..., :length, :], 2, indices, out=new[..., :length, :])
        self.spare = self.kv
        self._set_kv(new)
        if same_sources:
            return
        sentences = indices.view(-1, self.beams)[:, 0] // self.beams  # (B',)
        bias = None if self.memory_bias is None else self.memory_bias.index_select(0, sentences)
        self._set_cross(self.cross.index_select(2, sentences), bias)

    def _grow(self) -> None:
        """Double the capacity: a caller that decodes past the length it asked for still gets right answers."""
        grown = self.kv.new_empty(*self.kv.shape[:4], 2 * self.kv.size(4), self.kv.size(5))
        grown[..., : self.length, :] = self.kv[..., : self.length, :]
        self.spare = None
        self._set_kv(grown)

    def step(self, tokens: Tensor) -> Tensor:
        """Feed each row's newest token (N,) at position `length`; return next-token logits (N, V)."""
        dec, pos = self.decoder, self.length
        if pos == self.kv.size(4):
            self._grow()
        n, d, heads = tokens.size(0), dec.d, dec.heads
        dh, beams = d // heads, self.beams
        b = n // beams
        # x = embedding * scale + position, in one add
        x = torch.add(dec.positions[pos], F.embedding(tokens, dec.embedding), alpha=dec.scale)  # (N, D)
        for layer, (kv, k, v), (cross_k, cross_v) in zip(dec.layers, self.self_views, self.cross_views, strict=True):
            # masked self-attention: this position's K and V join the cache, its query reads all positions so far
            h = layer.norms[0](x) if dec.norm_first else x
            qkv = layer.self_qkv(h)  # (N, 3D)
            kv.select(3, pos).copy_(qkv[:, d:].view(n, 2, heads, dh).transpose(0, 1))
            q = qkv[:, :d].reshape(1, n * heads, 1, dh)
            a = _attend(q, k.narrow(2, 0, pos + 1), v.narrow(2, 0, pos + 1), None)  # (1, N * H, 1, Dh)
            x = self._residual(x, layer.self_out(a.view(n, d)), layer.norms[0])
            # cross-attention: a sentence's beams query its keys/values together
            h = layer.norms[1](x) if dec.norm_first else x
            q = layer.cross_q(h)  # (N, D) -> (1, B * H, beams, Dh)
            q = (
                q.view(1, n * heads, 1, dh)
                if beams == 1
                else q.view(b, beams, heads, dh).transpose(1, 2).reshape(1, -1, beams, dh)
            )
            a = _attend(q, cross_k, cross_v, self.bias)  # (1, B * H, beams, Dh)
            a = a.view(n, d) if beams == 1 else a.view(b, heads, beams, dh).transpose(1, 2).reshape(n, d)
            x = self._residual(x, layer.cross_out(a), layer.norms[1])
            # feed-forward
            h = layer.norms[2](x) if dec.norm_first else x
            x = self._residual(x, layer.ffn_out(dec.activation(layer.ffn_in(h))), layer.norms[2])
        if dec.final_norm is not None:
            x = dec.final_norm(x)
        logits = dec.output(x)  # (N, V)
        self.length = pos + 1
        return logits if dec.logits_bias is None else logits + dec.logits_bias

    def _residual(self, x: Tensor, out: Tensor, norm: _Norm) -> Tensor:
        """Pre-norm: x + out (the norm came before the sub-layer); post-norm: LayerNorm(x + out)."""
        return x + out if self.decoder.norm_first else norm(x + out)
