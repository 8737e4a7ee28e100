"""The training loop (section 5): one function, read top to bottom.

Teacher forcing: the decoder reads BOS + y and is trained to predict y + EOS at every position at
once, with label-smoothed cross-entropy, Adam(0.9, 0.98, 1e-9) and the warm-up schedule of Eq. 3.
Batches hold about `max_tokens` tokens (the paper: ~25k source + ~25k target tokens per batch);
gradient accumulation makes a larger effective batch from several smaller ones. With guided alignment
(`train.guided_alignment`) one cross-attention head is also trained toward word alignments (loss.py).

Everything the loop needs to continue is in its checkpoints: weights, Adam moments, the step (which
determines the learning rate), the data position (epoch, batch index: batches are a pure function of
seed and epoch) and the RNG state, so a resumed run ends with the same weights as an uninterrupted one
(how a run starts or resumes: start.py; for several processes under torchrun: distributed.py and
`start_run`'s note on RNG state).

An update reads nothing back from the device: its losses stay tensors, summed on the device, and are read (and
summed over ranks) once per log line, so on a GPU the host queues the next update while this one runs.
"""

import gc
import logging
import math
import random
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from tnmt.aligning_head import alignment_layer_index
from tnmt.checkpoint import average_checkpoints, remove_checkpoint, save_checkpoint, update_link
from tnmt.config import TrainConfig
from tnmt.data.batching import Batch, TokenBatchSampler, collate
from tnmt.data.dataset import ConcatPairs, EncodedPairs, TrainingPairs
from tnmt.data.multiway import MultiwayPairs
from tnmt.data.tokenizer import Tokenizer
from tnmt.device import mixed_precision, resolve_device, to_device
from tnmt.directions import parse_direction
from tnmt.evaluate import score
from tnmt.io import remove_leftovers
from tnmt.model import Transformer
from tnmt.recipe import Recipe
from tnmt.train.compiled import pad_multiple
from tnmt.train.curves import plot_curves
from tnmt.train.distill import prepare_distilled, write_diversified, write_translations
from tnmt.train.distributed import World, collective, env_world, process_group, translate_across
from tnmt.train.loss import GUIDED_HEAD, alignment_loss, model_loss
from tnmt.train.progress import Window
from tnmt.train.run_dir import RunDir
from tnmt.train.schedule import inverse_sqrt_lr
from tnmt.train.start import Run, TrainState, start_run
from tnmt.train.stop import Stopped, StopRequest
from tnmt.translate.translator import Translator

log = logging.getLogger("tnmt")


def train(recipe: Recipe, *, resume: bool = False, progress: bool = True, stop: StopRequest | None = None) -> Path:
    """Train as the recipe says and return the output directory (with `best` and `last` links).

    Launched by torchrun, every process runs this with its share of each update (see distributed.py).

    Raises:
        Stopped: `stop` was set (a signal, see train/stop.py); a checkpoint of the last update was saved.
    """
    cfg = recipe.train
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device, local_rank=env_world().local_rank)
    precision = mixed_precision(cfg.precision, device)  # before any work: fp16 on the CPU is an error
    stopped: Stopped | None = None
    with process_group(device=device, timeout_s=cfg.collective_timeout_s) as world:
        run = start_run(recipe, resume=resume, progress=progress, world=world, device=device, precision=precision)
        try:
            out = _train_run(run, world, stop)
        except Stopped as e:  # its traceback's frames hold the run: raised again below without them
            stopped = e.with_traceback(None)
        # The run's DDP model holds the process group: let it (and the cycles around it) go while the group is
        # still there. Freed at interpreter exit instead, gloo's threads were torn down late and a rank aborted
        # ("terminate called without an active exception"), in CI: after a finished run, then after a stop.
        del run
        gc.collect()
    if stopped:
        raise stopped
    return out


def _train_run(run: Run, world: World, stop: StopRequest | None) -> Path:
    """`train`'s loop over a started run: its output directory when it is done."""
    cfg = run.recipe.train
    if not world.is_main:  # dropout masks of its own; checkpoints keep rank 0's RNG state (see start_run)
        seed = random.Random(f"tnmt-dropout/{cfg.seed}/{world.rank}/{run.state.step}").getrandbits(63)
        torch.manual_seed(seed)
    if out_of_budget(cfg, run.state):  # resuming a run that already finished: nothing to add
        log.info(f"{run.out} already reached its budget at update {run.state.step}: nothing to resume")
        return _finish(run)
    run.model.train()
    clock = time.monotonic() - run.state.elapsed  # the budget's clock, continued when resuming
    window = Window()
    while True:
        if _train_epoch(run, window, clock=clock, stop=stop):
            return _finish(run)


def _train_epoch(run: Run, window: Window, *, clock: float, stop: StopRequest | None) -> bool:
    """Train from the state's position to the end of its epoch, validating and saving on the way;
    returns whether the run is over (budget spent, patience spent or the last epoch done)."""
    cfg, state = run.recipe.train, run.state
    _narrow_when_due(run)
    if _translation_due(cfg, state):
        _distill(run)
    data = _epoch_pairs(run)  # the epoch's segmentation (one, without subword samples), its directions
    sampler = TokenBatchSampler(data.lengths(), max_tokens=cfg.max_tokens, seed=cfg.seed)
    batches = sampler.batches(state.epoch)  # a pure function of (seed, epoch): resuming replays it
    while state.batch_index < len(batches):
        # One update takes the next world.size * accum_steps global batches.
        group = batches[state.batch_index : state.batch_index + run.world.size * cfg.accum_steps]
        window.add(*_update_on(run, data, group))
        stops = _count_update(run, len(group), clock=clock, stop=stop)
        if is_snapshot_step(state.step, cfg.snapshots_from) and run.world.is_main:
            _snapshot(run)
        if state.step % cfg.log_every == 0:
            _log_window(run, window)
        run.bar.advance(step=state.step, elapsed=state.elapsed)
        done = out_of_budget(cfg, state)
        validate = done or (cfg.eval_every and state.step % cfg.eval_every == 0)
        if validate and (_validate_and_save(run) or done):  # patience spent, or the budget
            return True
        if stops:
            _stop(run, stop.name if stop else "")
    state.epoch, state.batch_index = state.epoch + 1, 0
    if not cfg.eval_every and _validate_and_save(run):
        return True
    if cfg.max_epochs and state.epoch >= cfg.max_epochs:
        if cfg.eval_every:
            _validate_and_save(run)
        return True
    return False


def _narrow_when_due(run: Run) -> None:
    """Bidirectional training (data.first_direction_from): from the first epoch that starts past its share of the
    budget, the first direction alone. The epoch is kept in the state, so a resumed run narrows where the
    uninterrupted one did."""
    data, state = run.recipe.data, run.state
    share = data.first_direction_from
    if share and state.first_direction_epoch < 0 and state.batch_index == 0 and budget_share(run) >= share:
        state.first_direction_epoch = state.epoch
        first = data.directions[0]
        log.info(f"bidirectional training: from epoch {state.epoch} (update {state.step}) on, {first} only")


def _epoch_pairs(run: Run) -> TrainingPairs:
    """The pairs epoch `state.epoch` trains on: the corpus (its first direction alone once bidirectional training
    narrowed to it), then the model's own translations once it made them."""
    data, state = run.recipe.data, run.state
    pairs = run.train_data
    if 0 <= state.first_direction_epoch <= state.epoch:
        assert isinstance(pairs, MultiwayPairs)  # a multilingual corpus (recipe.py)
        pairs = pairs.only(parse_direction(data.directions[0]))
    if run.translated is not None:
        tag = run.tokenizer.language_id(data.trained_directions[0][1]) if data.multilingual else None
        pairs = ConcatPairs(pairs, run.translated, second_start=tag)
    return pairs.for_epoch(state.epoch)


def budget_share(run: Run) -> float:
    """How much of the training budget is spent: of its minutes, else its updates, else its epochs (0 when none)."""
    cfg, state = run.recipe.train, run.state
    if cfg.max_minutes:
        return state.elapsed / (60 * cfg.max_minutes)
    if cfg.max_steps:
        return state.step / cfg.max_steps
    return state.epoch / cfg.max_epochs if cfg.max_epochs else 0.0


def _update_on(run: Run, data: TrainingPairs, group: list[np.ndarray]) -> tuple[Tensor, Tensor, int, Tensor, Tensor]:
    """One update on a group of global batches (indices into `data`): the j-th goes to rank j mod N."""
    world, ids, device = run.world, run.tokenizer.special_ids, next(run.model.parameters()).device
    mine = group[world.rank :: world.size]
    guided = bool(run.recipe.train.guided_alignment)
    multiple = pad_multiple(run.model.compiled_layer is not None)
    batches = [
        to_device(
            collate(
                data.pairs(indices),
                **ids,
                links=data.links(indices) if guided else None,
                pad_multiple=multiple,
                starts=data.starts(indices),
            ),
            device,
        )
        for indices in mine or group[:1]
    ]
    with collective(world):
        return _update(run, batches, real=len(mine), steps=-(-len(group) // world.size))


def _count_update(run: Run, n_batches: int, *, clock: float, stop: StopRequest | None) -> bool:
    """Advance the state past one update; returns whether any rank was asked to stop (a signal).

    The time budget runs on rank 0's clock, so every rank stops after the same update."""
    state, world = run.state, run.world
    state.step, state.batch_index = state.step + 1, state.batch_index + n_batches
    state.elapsed, stops = world.sum(time.monotonic() - clock if world.is_main else 0.0, float(bool(stop)))
    return bool(stops)


def out_of_budget(cfg: TrainConfig, state: TrainState) -> bool:
    """Whether the update or wall-clock budget is spent (the epoch budget is checked at epoch ends)."""
    return bool(cfg.max_steps and state.step >= cfg.max_steps) or bool(
        cfg.max_minutes and state.elapsed >= 60 * cfg.max_minutes
    )


def _update(run: Run, batches: list[Batch], *, real: int, steps: int) -> tuple[Tensor, Tensor, int, Tensor, Tensor]:
    """One optimizer update over this rank's `real` batches (of `batches`), accumulated; returns this rank's
    summed label-smoothed loss, NLL, alignment loss and aligned target tokens (tensors on the device, unread),
    and the target tokens of all ranks.

    Every rank runs `steps` forward/backward passes so DDP's collectives stay in step: a rank short of data
    at the end of an epoch repeats its first batch with weight 0 (fairseq's dummy batch). The loss is divided
    by the target tokens of all ranks, times world.size because DDP averages gradients over ranks: the
    update equals one process accumulating every rank's batches. Gradients are all-reduced once, in the
    backward pass of the last micro-batch (`no_sync` before it). The alignment loss, weighted, joins the
    label-smoothed one before that division, as in Marian: summed over aligned tokens, divided by all tokens.
    """
    cfg, world, net, model, scaler = run.recipe.train, run.world, run.net, run.model, run.scaler
    (n_tokens,) = world.sum(sum(b.n_tgt_tokens for b in batches[:real]))
    total_loss, total_nll, total_align, n_aligned = torch.zeros(4, device=batches[0].src.device)
    for i in range(steps):
        batch, weight = (batches[i], world.size) if i < real else (batches[0], 0)
        last = i == steps - 1
        with nullcontext() if last or world.size == 1 else net.no_sync():
            loss, nll, align, aligned = _batch_losses(run, batch)
            objective = loss if align is None else loss + cfg.guided_alignment * align
            scaler.scale(objective * weight / n_tokens).backward()  # every token of the update weighs the same
        if i < real:
            total_loss, total_nll = total_loss + loss.detach(), total_nll + nll
            if align is not None:
                total_align, n_aligned = total_align + align.detach(), n_aligned + aligned
    scaler.unscale_(run.optimizer)
    if cfg.clip_norm:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
    step = run.state.step + 1
    lr = inverse_sqrt_lr(step, d_model=model.config.d_model, warmup_steps=cfg.warmup_steps, factor=cfg.lr_factor)
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    scaler.step(run.optimizer)
    scaler.update()
    if run.ema:
        run.ema.update(step)
    run.optimizer.zero_grad(set_to_none=True)
    return total_loss, total_nll, int(n_tokens), total_align, n_aligned


def _batch_losses(run: Run, batch: Batch) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """One batch's summed label-smoothed loss and NLL (`model_loss`), and with guided alignment its summed
    alignment loss and aligned target tokens (`alignment_loss`, from the same forward pass), else None twice."""
    cfg, model, dtype = run.recipe.train, run.model, run.precision.dtype
    src, tgt_in, alignment = batch.src, batch.tgt_in, batch.alignment
    passes = 2 if cfg.rdrop_alpha else 1
    if cfg.rdrop_alpha:  # R-Drop: the batch twice in one pass, each copy with its own dropout masks
        src, tgt_in = src.repeat(2, 1), tgt_in.repeat(2, 1)
        alignment = None if alignment is None else alignment.repeat(2, 1, 1)
    # features (B, T, D), (2B, T, D) with R-Drop; guided: also the guided layer's cross-attention (B, H, T, S)
    with torch.autocast(src.device.type, dtype=dtype, enabled=dtype is not None):
        if cfg.guided_alignment:
            layer = alignment_layer_index(run.recipe.decode.alignment_layer, model.config.n_decoder_layers)
            features, attention = run.net(src, tgt_in, features_only=True, cross_attention_of=layer)
        else:
            features, attention = run.net(src, tgt_in, features_only=True), None
    loss, nll = model_loss(
        model,
        features,
        batch.tgt_out,
        epsilon=cfg.label_smoothing,
        dtype=dtype,
        rdrop_alpha=cfg.rdrop_alpha,
        n_tokens=batch.n_tgt_tokens,
    )
    if attention is None:
        return loss, nll, None, None
    align, aligned = alignment_loss(attention[:, GUIDED_HEAD], alignment)  # R-Drop: the passes' mean, as `loss`
    return loss, nll, align / passes, aligned // passes


@torch.no_grad()
def validate(
    model: Transformer,
    tokenizer: Tokenizer,
    data: EncodedPairs,
    sources: list[str],
    references: list[str],
    *,
    recipe: Recipe,
    world: World,
) -> dict[str, float]:
    """Validation loss (per token, teacher-forced, no smoothing), sacreBLEU and chrF of decoded sources.

    `data` holds the `sources` and references as ids, fitted to the model's positions (`fit_pairs`): the loss
    reads them, and the decoding of the sources reads the same ids, so nothing is tokenised twice.
    Decoding follows the recipe's [decode] table (what the checkpoint will translate with), with
    `train.eval_beam_size` as the beam size when it is set. The ranks share the batches of both passes
    and every rank returns the metrics of the whole set.
    """
    model.eval()
    ids, device = tokenizer.special_ids, next(model.parameters()).device
    sampler = TokenBatchSampler(data.lengths(), max_tokens=recipe.train.max_tokens, seed=0, shuffle=False)
    total_nll, total_tokens = 0.0, 0
    for indices in sampler.batches(0)[world.rank :: world.size]:
        batch = to_device(collate(data.pairs(indices), **ids, starts=data.starts(indices)), device)
        features = model(batch.src, batch.tgt_in, features_only=True)  # (B, T, D)
        _, nll = model_loss(model, features, batch.tgt_out, epsilon=0.0)
        total_nll, total_tokens = total_nll + nll.item(), total_tokens + batch.n_tgt_tokens
    decode = replace(recipe.decode, beam_size=recipe.train.eval_beam_size or recipe.decode.beam_size)
    hypotheses = translate_across(world, Translator(model, tokenizer, decode), sources, data.src, starts=data.start_ids)
    total_nll, total_tokens = world.sum(total_nll, total_tokens)
    val_loss = total_nll / max(total_tokens, 1)
    scores = score(hypotheses, references)
    return {
        "val_loss": val_loss,
        "val_ppl": math.exp(min(val_loss, 50)),
        "val_bleu": scores.bleu,
        "val_chrf": scores.chrf,
    }


def _translation_due(cfg: TrainConfig, state: TrainState) -> bool:
    """Once, at an epoch start (the data changes between epochs only): the first from update `distill_at_step` on,
    or with `diversify` the first of the narrowed run."""
    due = state.first_direction_epoch >= 0 if cfg.diversify else state.step >= cfg.distill_at_step > 0
    return due and state.distilled_pairs < 0 and not state.batch_index


def _distill(run: Run) -> None:
    """Self-distillation or data diversification: the ranks translate the training corpus together, with the
    weights validation measures, and rank 0 writes the pairs; then every epoch reads them after the corpus's."""
    write = write_diversified if run.recipe.train.diversify else write_translations
    with _ema_swapped_in(run):
        written = write(run.model, run.tokenizer, run.recipe, world=run.world)
    run.model.train()
    run.world.barrier()  # rank 0 has written the files the others prepare next
    run.state.distilled_pairs = written
    if written:
        run.translated = prepare_distilled(run.recipe, run.tokenizer, run.model.config.max_len)


def _validate_and_save(run: Run) -> bool:
    """Validate, checkpoint, keep early-stopping count; True = patience is spent. Leaves the model training.

    The ranks validate together and rank 0 writes; every rank takes rank 0's metrics, so all keep the same
    state and make the same early-stopping decision.
    """
    cfg, state, world = run.recipe.train, run.state, run.world
    with _ema_swapped_in(run):
        text = run.valid_text
        metrics = validate(run.model, run.tokenizer, run.valid_data, text.src, text.tgt, recipe=run.recipe, world=world)
    metrics = world.from_main(metrics)
    current = metrics[f"val_{cfg.best_metric}"]
    improved = current > state.best_score
    if improved:
        state.best_score, state.best_step, state.bad_evals = current, state.step, 0
    else:
        state.bad_evals += 1
    if world.is_main:
        run.log.write(step=state.step, epoch=state.epoch, elapsed=state.elapsed, **metrics)
        _save(run)
        run.bar.bar.write(
            f"step {state.step}: val_loss {metrics['val_loss']:.3f}  val_bleu {metrics['val_bleu']:.2f}"
            f"  val_chrf {metrics['val_chrf']:.2f}  (best {cfg.best_metric} {state.best_score:.2f} at step"
            f" {state.best_step})"
        )
    run.model.train()
    return bool(cfg.patience) and state.bad_evals >= cfg.patience


def _log_window(run: Run, window: Window) -> None:
    """Write the window's per-token loss, perplexity, learning rate and speed, and start a new window.

    The one place training reads its losses back from the device, summed over the ranks."""
    state = run.state
    sums = run.world.sum(*(float(value) for value in (window.loss, window.nll, window.align, window.aligned)))
    rate = window.tokens / max(time.monotonic() - window.start, 1e-9)
    lr = run.optimizer.param_groups[0]["lr"]
    loss, nll = sums[0] / window.tokens, sums[1] / window.tokens
    # guided alignment: the cross-entropy per aligned target token, beside (not inside) the label-smoothed loss
    align = {"train_align_loss": sums[2] / max(sums[3], 1)} if run.recipe.train.guided_alignment else {}
    run.log.write(
        step=state.step,
        epoch=state.epoch,
        train_loss=loss,
        **align,
        train_ppl=math.exp(min(nll, 50)),
        lr=lr,
        tokens_per_s=rate,
        elapsed=state.elapsed,
    )
    run.bar.bar.set_postfix(step=state.step, loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:.0f}", epoch=state.epoch)
    window.reset()


def _save(run: Run) -> None:
    """A new step checkpoint, then the `last` and `best` links, then pruning of old ones and of leftovers.
    `best` follows `state.best_step`, which also repairs it after a kill between the two link updates."""
    out, state = RunDir(run.out), run.state
    state.grad_scaler = run.scaler.state_dict()
    training_weights = run.model.state_dict() if run.ema else None  # keeps these tensors through the swap
    with _ema_swapped_in(run):
        path = save_checkpoint(
            out.checkpoint(state.step),
            run.model,
            run.tokenizer,
            decode=run.recipe.decode,
            directions=run.recipe.data.trained_directions,
            optimizer=run.optimizer,
            trainer_state=asdict(state),
            training_weights=training_weights,
        )
    update_link(out.last, path)
    best = out.checkpoint(state.best_step)
    if best.is_dir() and out.best.resolve() != best.resolve():
        update_link(out.best, best)
    keep = {link.resolve() for link in (out.last, out.best) if link.exists()}
    steps = out.step_checkpoints()
    for old in steps[: -run.recipe.train.keep_checkpoints]:
        if old.resolve() not in keep:
            remove_checkpoint(old)
    _remove_leftovers(run)


def is_snapshot_step(step: int, first: int) -> bool:
    """Whether update `step` is one of `first`, 2 `first`, 4 `first`, ... (log-spaced: the early updates, where
    the model changes most, get most of them); never when `first` is 0."""
    return first > 0 and step % first == 0 and (step // first) & (step // first - 1) == 0


def _snapshot(run: Run) -> None:
    """The model's weights now (the EMA's when there is one, as validation sees them), without the optimizer, as a
    checkpoint in OUT/snapshots: what `tnmt replay` shows the run learning from."""
    with _ema_swapped_in(run):
        save_checkpoint(
            RunDir(run.out).snapshot(run.state.step),
            run.model,
            run.tokenizer,
            decode=run.recipe.decode,
            directions=run.recipe.data.trained_directions,
        )


def _stop(run: Run, signal_name: str) -> None:
    """Checkpoint the update just done (unless validation just did) and raise `Stopped`: training has not
    ended, so no averaging and no curves (a resume makes them). `signal_name` is empty on a rank that
    stops because another rank got the signal."""
    signal_name = signal_name or "another rank's signal"
    path = RunDir(run.out).checkpoint(run.state.step)
    if run.world.is_main and RunDir(run.out).last.resolve() != path.resolve():
        try:
            _save(run)
        except OSError as e:
            why = f"stopping on {signal_name}, could not save a checkpoint: {e.strerror}"
            raise OSError(e.errno, why, e.filename) from None
    run.bar.bar.close()
    raise Stopped(signal_name, run.state.step, path)


def _finish(run: Run) -> Path:
    run.bar.bar.close()
    if run.world.is_main:  # the only rank that writes
        _remove_leftovers(run)  # also when a resumed run had nothing left to do
        if n := run.recipe.train.average_last:  # section 6.1: the paper decodes the average of the last 5 (big: 20)
            steps = RunDir(run.out).step_checkpoints()[-n:]  # older ones kept only as `best` drop out
            average_checkpoints(steps, RunDir(run.out).averaged)
            log.info(f"averaged the last {len(steps)} checkpoints ({steps[0].name} to {steps[-1].name}) into averaged")
        plot_curves(RunDir(run.out).metrics, RunDir(run.out).curves)
    return run.out


def _remove_leftovers(run: Run) -> None:
    """What a killed run (or a failed deletion) left behind: hidden, but it takes space."""
    for directory in (run.out, RunDir(run.out).checkpoints, RunDir(run.out).snapshots):
        if directory.is_dir():
            remove_leftovers(directory)


def _ema_swapped_in(run: Run) -> AbstractContextManager[None]:
    """The model holds the weights validation and checkpoints use: the EMA when there is one."""
    return run.ema.swapped_in() if run.ema else nullcontext()
