"""Watch it learn: one sentence through a training run, checkpoint by checkpoint.

A run keeps the model as it was at several updates (`checkpoints/step_*`, the last few for averaging, and
`snapshots/step_*`, log-spaced from the start), and the metrics of every update it logged (`metrics.jsonl`): its
layout is train/run_dir.py's. `replay` loads each kept model in turn, one at a time, and asks it what the final
model is asked by the other views: its greedy and beam translations of the sentence, with each word's probability; the
probability it gives a reference translation (teacher-forced); and the cross-attention of its aligning layer over
its own translation, exactly as `tnmt inspect` draws it (views/inside.py). Side by side they show what the curves
only hint at: when the output stops being one repeated word, when it starts to stop at EOS, when the attention
turns from a blur into a diagonal, and what the validation loss and BLEU were doing meanwhile.

`tnmt replay` prints it (`format_replay`) or its JSON (`replay_dict`); `POST /v1/replay` answers that JSON and the
page's "Watch it learn" view draws it.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tnmt.aligning_head import alignment_layer_index
from tnmt.errors import UserError
from tnmt.train.run_dir import KeptModel, RunDir
from tnmt.translate.translator import Translator
from tnmt.views.inside import inside
from tnmt.views.json_values import as_json, rounded

MAX_CHARS = 500  # a replay follows one sentence
CURVES = ("train_loss", "val_loss", "val_bleu", "val_chrf")


@dataclass(frozen=True)
class Attention:
    """The aligning layer's cross-attention over the model's own translation: `weights` (T, S), row t the
    attention while predicting `target[t]` (the translation's pieces, then EOS) over `source` (pieces, then EOS)."""

    layer: int  # 1 = the decoder's first
    head: int  # 1 = the first; 0 = the heads' mean
    source: list[str]
    target: list[str]
    weights: list[list[float]]


@dataclass(frozen=True)
class Moment:
    """The sentence as the model of one kept update saw it."""

    step: int
    kind: str
    metrics: dict[str, float]  # the last training record logged by then, and the validation at this step if any
    greedy: str
    beam: str
    beam_size: int
    words: list[str]  # the beam translation's words
    word_probs: list[float]  # their probabilities
    confidence: float  # the beam translation's, as its evidence gives it
    reference_log_prob: float | None  # ln p(reference | sentence), teacher-forced, EOS included
    reference_tokens: int
    attention: Attention


@dataclass(frozen=True)
class Replay:
    """A sentence through a run: one `Moment` per kept model, in order, and the run's curves ([step, value])."""

    run: str
    text: str
    reference: str | None
    source: str | None
    target: str | None
    moments: list[Moment]
    curves: dict[str, list[list[float]]]


def replay(
    run: Path,
    text: str,
    *,
    reference: str | None = None,
    source: str | None = None,
    target: str | None = None,
    progress: Callable[[int, int], object] | None = None,
    device: str = "cpu",
) -> Replay:
    """`text` through every model `run` kept (see the module docstring), each loaded on `device`; `source` and
    `target` choose the pair of a multilingual run; `progress(done, total)` before each model and after the last
    (an exception it raises stops the replay there: a server's deadline).

    Raises:
        UserError: not a run, an empty or too long text, a text of several sentences, a pair the run's models do
            not translate.
    """
    if not text.strip():
        raise UserError("the sentence is empty: nothing to replay")
    if len(text) > MAX_CHARS:
        raise UserError(f"the sentence has {len(text)} characters: over {MAX_CHARS} (a replay follows one sentence)")
    if reference is not None and not reference.strip():
        raise UserError("the reference is empty: leave it out, or give the translation to score")
    if (source is None) != (target is None):
        raise UserError("name the language pair with both source and target")
    kept, records = RunDir(run).kept_models(), RunDir(run).records()
    moments = []
    for done, model in enumerate(kept):
        if progress is not None:
            progress(done, len(kept))
        translator = Translator.from_checkpoint(model.path, device=device)
        if source is not None and target is not None:
            translator = translator.for_pair(source, target)
        moments.append(_moment(translator, model, text, reference, records))
    if progress is not None:
        progress(len(kept), len(kept))
    curves = {key: [[r["step"], r[key]] for r in records if isinstance(r.get(key), int | float)] for key in CURVES}
    return Replay(str(run), text, reference, source, target, moments, curves)


def _moment(translator: Translator, model: KeptModel, text: str, reference: str | None, records: list[dict]) -> Moment:
    """What the model of `model` makes of `text` (and of `reference`)."""
    settings = translator.decode
    split = translator.split([text], None, settings)  # read once, as `tnmt translate` reads it
    if len(split.prepared) > 1:
        raise UserError("a replay follows one sentence: this text has several (give one)")
    [prepared] = split.prepared
    [beam] = translator.translate_prepared([prepared], settings, evidence=True)
    [greedy] = translator.translated(split, replace(settings, beam_size=1))
    # the inspect view's pass over the model's own translation of what it reads: the beam's, not searched again
    look = inside(translator, prepared.text, settings, prepared=prepared, searched=beam)
    layer = alignment_layer_index(settings.alignment_layer, translator.model.config.n_decoder_layers)
    heads = look.forward.cross_attention[layer]  # (H, T, S)
    rows = heads.mean(dim=0) if settings.alignment_head == 0 else heads[settings.alignment_head - 1]
    scored = inside(translator, text, settings, translation=reference) if reference is not None else None
    evidence = beam.evidence
    return Moment(
        step=model.step,
        kind=model.kind,
        metrics=_metrics_at(records, model.step),
        greedy=greedy.text,
        beam=translator.translated(split, segments=[beam])[
            0
        ].text,  # as `tnmt translate` prints it (a list marker copied)
        beam_size=settings.beam_size,
        words=beam.text.split(),  # the model's own, which its probabilities and attention are of
        word_probs=[rounded(p) for p in evidence.word_probs] if evidence else [],
        confidence=rounded(evidence.confidence) if evidence else 0.0,
        reference_log_prob=(
            rounded(sum(math.log(max(p.prob, 1e-45)) for p in scored.forward.predictions)) if scored else None
        ),
        reference_tokens=len(scored.forward.predictions) if scored else 0,
        attention=Attention(layer + 1, settings.alignment_head, look.source_pieces, look.next_pieces, rounded(rows)),
    )


def _metrics_at(records: list[dict[str, Any]], step: int) -> dict[str, float]:
    """The last training record logged at or before `step` and the validation logged at `step`, merged."""
    metrics: dict[str, float] = {}
    for record in records:
        if record["step"] > step:
            break
        if "train_loss" in record or record["step"] == step:
            keep = ("train_loss", "lr", "epoch") if "train_loss" in record else ("val_loss", "val_bleu", "val_chrf")
            metrics |= {key: record[key] for key in keep if isinstance(record.get(key), int | float)}
    return metrics


def replay_dict(found: Replay) -> dict[str, Any]:
    """The replay as JSON's types (`tnmt replay --json`, `POST /v1/replay`)."""
    return as_json(found)


def format_replay(found: Replay) -> str:
    """The replay as text: one block per kept model, each target word with the source piece it attends to most."""
    first, last = found.moments[0].step, found.moments[-1].step
    lines = [f"run: {found.run}: {len(found.moments)} kept models, updates {first} to {last}"]
    lines.append(f"sentence: {found.text}")
    if found.reference is not None:
        lines.append(f"reference: {found.reference}")
    for moment in found.moments:
        greedy, beam = _said(moment.greedy), _said(moment.beam)
        lines += ["", _heading(moment), f"  greedy : {greedy}", f"  beam {moment.beam_size} : {beam}"]
        words = zip(moment.words, moment.word_probs, strict=True)
        lines.append(f"  words  : {'  '.join(f'{w} {p:.2f}' for w, p in words)}")
        if moment.reference_log_prob is not None:
            lines.append(f"  reference: ln p = {moment.reference_log_prob:.2f} ({_per_token(moment):.2f} a token)")
        lines.append(f"  attention (decoder layer {moment.attention.layer}, {_head(moment.attention.head)}):")
        lines.append(f"    {_strongest(moment.attention)}")
    return "\n".join(lines)


def format_trajectory(found: Replay) -> str:
    """The replay in one line per kept model: its update, its beam translation, and (with a reference) the
    probability it gives the reference, a token on average: where the run was heading."""
    lines = []
    for moment in found.moments:
        line = f"  update {moment.step:>6}: {_said(moment.beam)}"
        if moment.reference_log_prob is not None:
            line += f"   (reference: {_per_token(moment):.2f} a token)"
        lines.append(line)
    return "\n".join(lines)


def _said(translation: str) -> str:
    """A translation as the text views print it: an empty one named (the model wrote EOS first)."""
    return translation if translation.strip() else "(nothing: the model writes EOS first)"


def _per_token(moment: Moment) -> float:
    """The reference's probability, a token on average (the geometric mean)."""
    return math.exp(moment.reference_log_prob / max(moment.reference_tokens, 1))


def _heading(moment: Moment) -> str:
    names = {"train_loss": "train loss", "val_loss": "valid loss", "val_bleu": "valid BLEU", "val_chrf": "chrF"}
    figures = [f"{names[k]} {moment.metrics[k]:.2f}" for k in names if k in moment.metrics]
    return f"step {moment.step} ({moment.kind})" + (f": {', '.join(figures)}" if figures else "")


def _head(head: int) -> str:
    return "the heads' mean" if head == 0 else f"head {head}"


def _strongest(attention: Attention) -> str:
    """Each target piece with the source piece it attends to most and that weight: "Hunde<-dogs .81"."""
    out = []
    for piece, row in zip(attention.target, attention.weights, strict=True):
        best = max(range(len(row)), key=row.__getitem__)
        out.append(f"{piece}<-{attention.source[best]} {row[best]:.2f}")
    return "  ".join(out)
