"""Inside the model: one teacher-forced forward pass, every stage of the lesson recorded as data.

The lesson walks a sentence through the Transformer in order: subword pieces and their ids, embeddings scaled
by sqrt(d_model) with the positional table added, the padding and causal masks, each layer's multi-head
attention (the encoder's self-attention, the decoder's masked self-attention and its cross-attention), add &
norm around every sub-layer, the feed-forward network, and the final linear layer and softmax that predict
each next word while teacher forcing feeds in the right one. `look_inside` records all of it for one source
and a translation (the model's own, or one the caller gives) from the pass that translates: the blocks report
what flows through them (blocks/record.py); nothing here computes a layer again. `tnmt inspect`,
`POST /v1/inspect` and the page's "Inside the model" view show it (views/inside_view.py: its JSON and its text).

Numbering, as everywhere a person reads it: layers 1..N from the input side, heads 1..H; the lists below are
0-indexed (layer 1 is `encoder_layers[0]`). Positions count from 0, as the positional formula does.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tnmt.blocks.masks import causal_mask, padding_mask
from tnmt.config import DecodeConfig
from tnmt.errors import UserError
from tnmt.model import Transformer
from tnmt.translate.door import ModelDoor
from tnmt.translate.prepared import Prepared, Source
from tnmt.translate.translation import Translation
from tnmt.translate.translator import Translator

log = logging.getLogger("tnmt")

TABLE_ROWS = 32  # positions of the positional table shown at least (more when the sentence is longer)
TOP_UNITS = 5  # the most active feed-forward units listed per position
MAX_TOP_K = 20


@dataclass(frozen=True)
class Embedded:
    """One side's embedding stage, per position: the sizes (root mean square over the D features) of the token's
    embedding, of it times the scale, of the position's vector and of their sum (the first layer's input)."""

    token_rms: list[float]
    scaled_rms: list[float]
    position_rms: list[float]
    sum_rms: list[float]


@dataclass(frozen=True)
class SubLayer:
    """Add & norm around one sub-layer, per position (sizes as root mean squares over the D features).

    `stream` enters the block, the sub-layer adds `update`, and the block passes on `out`. Layer norm reads
    `norm_in` and writes `norm_out`: with post-norm (the paper's) it normalises the sum stream + update and that
    is `out`; with pre-norm it normalises the stream before the sub-layer reads it, and out = stream + update.
    """

    name: str  # "self-attention" | "masked self-attention" | "cross-attention" | "feed-forward"
    stream: list[float]
    update: list[float]
    norm_in: list[float]
    norm_out: list[float]
    out: list[float]


@dataclass(frozen=True)
class FeedForwardUnits:
    """The feed-forward network's hidden layer, per position: how many of its d_ff units are active (above 0)
    and the most active ones, as (unit, activation)."""

    d_ff: int
    active: list[int]
    top: list[list[tuple[int, float]]]


@dataclass(frozen=True)
class LayerInside:
    """One encoder or decoder layer: its sub-layers in order, and its feed-forward units."""

    sublayers: list[SubLayer]
    ffn: FeedForwardUnits


@dataclass(frozen=True)
class Prediction:
    """The softmax at one target position: the token fed in (teacher forcing), the token that should come next
    with its probability and rank (1 = the likeliest), and the `top_k` likeliest tokens."""

    fed: int
    next: int
    prob: float
    rank: int
    top: list[tuple[int, float]]


@dataclass(frozen=True)
class ForwardPass:
    """What one teacher-forced pass over a sentence computed, stage by stage (module docstring); S source
    positions (EOS included), T target positions (BOS and the output), L layers, H heads."""

    source_ids: list[int]  # (S,) pieces' ids then EOS
    fed_ids: list[int]  # (T,) BOS then the output: the decoder's input
    next_ids: list[int]  # (T,) the output then EOS: what each position should predict
    scale: float  # the embeddings' factor, sqrt(d_model) (1 when the model does not scale)
    table: Tensor  # (P, D) the positional vectors of positions 0..P-1, as the model adds them
    source: Embedded
    target: Embedded
    source_mask: Tensor  # (S,) the padding mask of the encoder's keys as applied (True: may attend)
    target_mask: Tensor  # (T, T) the decoder self-attention's mask as applied (causal and padding)
    encoder_attention: Tensor  # (L, H, S, S)
    decoder_attention: Tensor  # (L, H, T, T)
    cross_attention: Tensor  # (L, H, T, S)
    encoder_layers: list[LayerInside]
    decoder_layers: list[LayerInside]
    predictions: list[Prediction]  # (T,)


@dataclass(frozen=True)
class Inside:
    """A sentence, its translation and the forward pass over them."""

    text: str
    translation: str
    given: bool  # the translation was the caller's, not the model's own
    source_pieces: list[str]  # (S,)
    fed_pieces: list[str]  # (T,)
    next_pieces: list[str]  # (T,)
    forward: ForwardPass


def inside(
    translator: Translator,
    text: str,
    settings: DecodeConfig | None = None,
    *,
    translation: str | None = None,
    top_k: int = 5,
    prepared: Prepared | None = None,
    searched: Translation | None = None,
) -> Inside:
    """The pass over `text` and its translation, as the translator reads them: the text it searched (its kept
    spans, URLs and emoji, taken out: translate/prepared.py) and the model's own translation for `settings` (the
    text `Translator.translations` gives), or `translation` as given, teacher-forced either way. `prepared`: the
    text as `Translator.prepare` gave it, when the caller has it (a server prepares when a request arrives);
    `searched`: the model's own translation of `prepared`, when the caller has searched it already.

    Raises:
        UserError: an empty text, one the model reads nothing of, or top_k outside [1, MAX_TOP_K].
    """
    if not text.strip():
        raise UserError("the text is empty: nothing to look inside")
    if not 1 <= top_k <= MAX_TOP_K:
        raise UserError(f"top_k = {top_k}: must be from 1 to {MAX_TOP_K}")
    tokenizer, max_len = translator.tokenizer, translator.model.config.max_len
    prepared = prepared or translator.prepare([text], None, settings)[0]
    source = prepared.searched()
    if translation is None:
        found = searched or translator.translate_prepared([prepared], settings)[0]
        output, translation, given = found.tokens, found.text, False
    else:
        output, given = tokenizer.encode_target(translation), True
        if len(output) > max_len - 1:  # room for BOS
            n = len(output)
            log.warning(f"the translation's {n} tokens exceed the model's max_len; feeding the first {max_len - 1}")
            output = output[: max_len - 1]
    forward = look_inside(translator.door, source, output, top_k=top_k)
    return Inside(
        text=text,
        translation=translation,
        given=given,
        source_pieces=source.pieces[: len(source.ids)] + tokenizer.target_pieces([tokenizer.eos_id]),
        fed_pieces=tokenizer.target_pieces(forward.fed_ids),
        next_pieces=tokenizer.target_pieces(forward.next_ids),
        forward=forward,
    )


@torch.inference_mode()
def look_inside(door: ModelDoor, source: Source, output: Sequence[int], *, top_k: int) -> ForwardPass:
    """Run the model on one source and an output after the source's start token as a translation runs it, and
    record every stage: the door's teacher-forced pass (translate/door.py), the encoder as a search encodes and the
    decoder that translates on a fresh KV cache, all positions in one block (the body of a search's step, causal),
    its blocks reporting what flows through them (blocks/record.py).

    The model must be in eval mode: with dropout, the pass would not be the one that translates.
    """
    model = door.model
    if model.training:
        raise ValueError("look inside a model in eval mode: dropout would change the pass")
    recorded = _Recorded()
    forced = door.teacher_forced([source], [output], record=recorded)
    src_ids, fed_ids = door.source_batch([source]), forced.fed  # (1, S), (1, T)
    t, s = fed_ids.size(1), src_ids.size(1)
    fed = fed_ids[0].tolist()
    next_ids = [*fed[1:], door.eos_id]
    table = model.positions.rows(0, min(model.config.max_len, max(TABLE_ROWS, s, t)))
    return ForwardPass(
        source_ids=src_ids[0].tolist(),
        fed_ids=fed,
        next_ids=next_ids,
        scale=model.src_embed.scale,
        table=table.float().cpu(),
        source=_embedded(model, model.src_embed, src_ids[0], recorded.input("encoder")),
        target=_embedded(model, model.tgt_embed, fed_ids[0], recorded.input("decoder")),
        source_mask=padding_mask(src_ids, model.config.pad_id).reshape(s).cpu(),
        target_mask=causal_mask(t)[0, 0].cpu(),  # what self-attention on a cache applies to a block of T
        encoder_attention=_stacked(forced.encoded.encoder_attention or []),
        decoder_attention=_stacked([w[0] for w in forced.weights]),
        cross_attention=_stacked([w[1] for w in forced.weights]),
        encoder_layers=recorded.layers("encoder", model.config.n_encoder_layers),
        decoder_layers=recorded.layers("decoder", model.config.n_decoder_layers),
        predictions=_predictions(forced.logits[0], fed, next_ids, top_k),
    )


class _Recorded:
    """A recorder (blocks/record.py): what the blocks reported during one pass, by where they report it."""

    def __init__(self) -> None:
        self.reports: dict[tuple[str | int, ...], dict[str, Tensor]] = {}

    def __call__(self, *where: str | int, **tensors: Tensor) -> None:
        self.reports[where] = tensors

    def input(self, stack: str) -> Tensor | None:
        """The stack's input (P, D): embeddings + positions (None without layers: nothing reads it)."""
        report = self.reports.get((stack, "input"))
        return None if report is None else report["x"]

    def layers(self, stack: str, n: int) -> list[LayerInside]:
        names = SUBLAYERS[stack]
        return [
            LayerInside(
                [self._sublayer(name, self.reports[(stack, i, name)]) for name in names],
                _units(self.reports[(stack, i, "hidden units")]["hidden"]),
            )
            for i in range(n)
        ]

    @staticmethod
    def _sublayer(name: str, report: dict[str, Tensor]) -> SubLayer:
        x, read, update, out = (report[k] for k in ("stream", "read", "update", "out"))  # (P, D) each
        pre_norm = read is not x  # post-norm's sub-layer reads the stream itself
        norm_in, norm_out = (x, read) if pre_norm else (x + update, out)
        return SubLayer(name, *(_rms(v) for v in (x, update, norm_in, norm_out, out)))


SUBLAYERS = {
    "encoder": ["self-attention", "feed-forward"],
    "decoder": ["masked self-attention", "cross-attention", "feed-forward"],
}


def _embedded(model: Transformer, embedding: nn.Module, ids: Tensor, first_input: Tensor | None) -> Embedded:
    """The embedding stage of one side: the token rows and positions from the model's tensors, and the sum the
    first layer actually read (without layers, the sum of the two)."""
    token = embedding.weight[ids].float()  # (P, D)
    scaled = token * embedding.scale
    position = model.positions.rows(0, ids.size(0)).float()
    total = scaled + position if first_input is None else first_input.float()
    return Embedded(*(_rms(v) for v in (token, scaled, position, total)))


def _units(hidden: Tensor) -> FeedForwardUnits:
    """Active units (above 0) and the most active ones, per position, of hidden activations (T, F)."""
    values, units = hidden.float().topk(min(TOP_UNITS, hidden.size(1)), dim=1)
    top = [
        [(u, round(v, 3)) for u, v in zip(row_units, row_values, strict=True)]
        for row_units, row_values in zip(units.tolist(), values.tolist(), strict=True)
    ]
    return FeedForwardUnits(hidden.size(1), (hidden > 0).sum(dim=1).tolist(), top)


def _predictions(logits: Tensor, fed: list[int], next_ids: list[int], top_k: int) -> list[Prediction]:
    """The softmax of each position's logits (T, V): its top_k, and the probability and rank of the next token."""
    probs = logits.float().softmax(dim=-1)  # (T, V)
    values, tokens = probs.topk(min(top_k, probs.size(1)), dim=1)
    expected = probs[torch.arange(len(next_ids)), torch.tensor(next_ids)]  # (T,)
    ranks = (probs > expected[:, None]).sum(dim=1) + 1
    return [
        Prediction(
            fed[i],
            next_ids[i],
            float(expected[i]),
            int(ranks[i]),
            list(zip(tokens[i].tolist(), values[i].tolist(), strict=True)),
        )
        for i in range(len(fed))
    ]


def _stacked(layers: list[Tensor]) -> Tensor:
    """Per-layer (1, H, Q, K) weights as one (L, H, Q, K) tensor on the CPU (empty when there is no layer)."""
    return torch.cat(layers).float().cpu() if layers else torch.empty(0)


def _rms(vectors: Tensor) -> list[float]:
    """Each row's root mean square (P, D) -> P floats, rounded: the size of a vector, per feature."""
    return [round(v, 4) for v in vectors.float().pow(2).mean(dim=-1).sqrt().tolist()]
