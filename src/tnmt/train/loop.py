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
from dataclasses import asdict
from pathlib import Path

import torch

from tnmt.checkpoint import average_checkpoints, remove_checkpoint, save_checkpoint, update_link
from tnmt.config import TrainConfig
from tnmt.data.batching import TokenBatchSampler
from tnmt.data.dataset import ConcatPairs, TrainingPairs
from tnmt.data.multiway import MultiwayPairs
from tnmt.device import mixed_precision, resolve_device
from tnmt.directions import parse_direction
from tnmt.io import remove_leftovers
from tnmt.recipe import Recipe
from tnmt.train.curves import plot_curves
from tnmt.train.distill import prepare_distilled, write_diversified, write_translations
from tnmt.train.distributed import World, env_world, process_group
from tnmt.train.progress import Window
from tnmt.train.run_dir import RunDir
from tnmt.train.start import Run, TrainState, start_run
from tnmt.train.stop import Stopped, StopRequest
from tnmt.train.update import update_on
from tnmt.train.validation import validate

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
        window.add(*update_on(run, data, group))
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
            shortlist=run.shortlist,
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
