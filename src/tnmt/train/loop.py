"""The training loop (section 5): one function, read top to bottom.

Teacher forcing: the decoder reads BOS + y and is trained to predict y + EOS at every position at
once, with label-smoothed cross-entropy, Adam(0.9, 0.98, 1e-9) and the warm-up schedule of Eq. 3.
Batches hold about `max_tokens` tokens (the paper: ~25k source + ~25k target tokens per batch);
gradient accumulation makes a larger effective batch from several smaller ones.

Everything the loop needs to continue is in its checkpoints: weights, Adam moments, the step (which
determines the learning rate), the data position (epoch, batch index: batches are a pure function of
seed and epoch) and the RNG state, so a resumed run ends with the same weights as an uninterrupted one.
"""

import json
import logging
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from tnmt.checkpoint import (
    average_checkpoints,
    load_checkpoint,
    remove_checkpoint,
    remove_leftovers,
    save_checkpoint,
    update_link,
)
from tnmt.config import TrainConfig
from tnmt.data.batching import TokenBatchSampler, collate
from tnmt.data.corpus import ParallelCorpus
from tnmt.data.dataset import EncodedPairs, encode, read_split
from tnmt.data.shards import PreparedPairs, prepare_recipe
from tnmt.data.tokenizer import Tokenizer
from tnmt.decode.translator import Translator
from tnmt.errors import UserError
from tnmt.evaluate import score
from tnmt.io import atomic_write_text
from tnmt.model import Transformer
from tnmt.recipe import Recipe
from tnmt.train.loss import label_smoothed_loss
from tnmt.train.progress import MetricsLog, Progress, Window
from tnmt.train.schedule import inverse_sqrt_lr
from tnmt.train.stop import Stopped, StopRequest
from tnmt.visualize import plot_curves

log = logging.getLogger("tnmt")


@dataclass
class TrainState:
    """Where training is: saved in every checkpoint's trainer_state.json."""

    step: int = 0  # optimizer updates done
    epoch: int = 0
    batch_index: int = 0  # next batch of `epoch`
    best_score: float = -1.0  # of TrainConfig.best_metric
    best_step: int = 0
    bad_evals: int = 0  # validations since the best score (early stopping)
    elapsed: float = 0.0  # training seconds, carried over resumes for max_minutes


@dataclass
class Run:
    """What one training run works on, handed to the helpers of `train`."""

    recipe: Recipe
    out: Path
    model: Transformer
    tokenizer: Tokenizer
    optimizer: torch.optim.Optimizer
    state: TrainState
    train_data: PreparedPairs | EncodedPairs  # lengths() and pairs(indices): on disk, or in memory
    valid_data: EncodedPairs
    valid_text: ParallelCorpus
    log: MetricsLog
    bar: Progress


def train(recipe: Recipe, *, resume: bool = False, progress: bool = True, stop: StopRequest | None = None) -> Path:
    """Train as the recipe says and return the output directory (with `best` and `last` links).

    Raises:
        Stopped: `stop` was set (a signal, see train/stop.py); a checkpoint of the last update was saved.
    """
    cfg = recipe.train
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    run = _prepare(recipe, resume=resume, progress=progress)
    state, ids = run.state, _special_ids(run.tokenizer)
    sampler = TokenBatchSampler(run.train_data.lengths(), max_tokens=cfg.max_tokens, seed=cfg.seed)
    window = Window()
    started = time.monotonic() - state.elapsed
    if out_of_budget(cfg, state):  # resuming a run that already finished: nothing to add
        log.info(f"{run.out} already reached its budget at update {state.step}: nothing to resume")
        return _finish(run)
    run.model.train()
    while True:
        batches = sampler.batches(state.epoch)  # a pure function of (seed, epoch): resuming replays it
        while state.batch_index < len(batches):
            group = batches[state.batch_index : state.batch_index + cfg.accum_steps]
            step_batches = [collate(run.train_data.pairs(b), **ids) for b in group]
            window.add(*_update(run.model, run.optimizer, step_batches, cfg=cfg, step=state.step + 1))
            state.step, state.batch_index = state.step + 1, state.batch_index + len(group)
            state.elapsed = time.monotonic() - started
            if state.step % cfg.log_every == 0:
                _log_window(run, window)
                window = Window()
            run.bar.advance(step=state.step, elapsed=state.elapsed)
            done = out_of_budget(cfg, state)
            if done or (cfg.eval_every and state.step % cfg.eval_every == 0):
                patience_spent = _validate_and_save(run)
                if patience_spent or done:
                    return _finish(run)
            if stop:
                _stop(run, stop)
        state.epoch, state.batch_index = state.epoch + 1, 0
        if not cfg.eval_every and _validate_and_save(run):
            return _finish(run)
        if cfg.max_epochs and state.epoch >= cfg.max_epochs:
            if cfg.eval_every:
                _validate_and_save(run)
            return _finish(run)


def out_of_budget(cfg: TrainConfig, state: TrainState) -> bool:
    """Whether the update or wall-clock budget is spent (the epoch budget is checked at epoch ends)."""
    return bool(cfg.max_steps and state.step >= cfg.max_steps) or bool(
        cfg.max_minutes and state.elapsed >= 60 * cfg.max_minutes
    )


def _update(
    model: Transformer, optimizer: torch.optim.Optimizer, batches: list, *, cfg: TrainConfig, step: int
) -> tuple[float, float, int]:
    """One optimizer update over (possibly several accumulated) batches; returns summed loss, NLL, tokens."""
    n_tokens = sum(b.n_tgt_tokens for b in batches)
    total_loss = total_nll = 0.0
    for batch in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        loss, nll = label_smoothed_loss(logits, batch.tgt_out, epsilon=cfg.label_smoothing, pad_id=model.config.pad_id)
        (loss / n_tokens).backward()  # every token of the update weighs the same
        total_loss, total_nll = total_loss + loss.item(), total_nll + nll.item()
    if cfg.clip_norm:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
    lr = inverse_sqrt_lr(step, d_model=model.config.d_model, warmup_steps=cfg.warmup_steps, factor=cfg.lr_factor)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total_loss, total_nll, n_tokens


@torch.no_grad()
def evaluate(
    model: Transformer,
    tokenizer: Tokenizer,
    data: EncodedPairs,
    sources: list[str],
    references: list[str],
    *,
    recipe: Recipe,
) -> dict[str, float]:
    """Validation loss (per token, teacher-forced, no smoothing), sacreBLEU and chrF of decoded sources.

    Decoding follows the recipe's [decode] table (what the checkpoint will translate with), with
    `train.eval_beam_size` as the beam size when it is set.
    """
    model.eval()
    ids = _special_ids(tokenizer)
    sampler = TokenBatchSampler(data.lengths(), max_tokens=recipe.train.max_tokens, seed=0, shuffle=False)
    total_nll, total_tokens = 0.0, 0
    for indices in sampler.batches(0):
        batch = collate(data.pairs(indices), **ids)
        _, nll = label_smoothed_loss(model(batch.src, batch.tgt_in), batch.tgt_out, epsilon=0.0, pad_id=ids["pad_id"])
        total_nll, total_tokens = total_nll + nll.item(), total_tokens + batch.n_tgt_tokens
    decode = replace(recipe.decode, beam_size=recipe.train.eval_beam_size or recipe.decode.beam_size)
    hypotheses = Translator(model, tokenizer, decode).translate(sources)
    val_loss = total_nll / max(total_tokens, 1)
    scores = score(hypotheses, references)
    return {
        "val_loss": val_loss,
        "val_ppl": math.exp(min(val_loss, 50)),
        "val_bleu": scores.bleu,
        "val_chrf": scores.chrf,
    }


def _prepare(recipe: Recipe, *, resume: bool, progress: bool) -> Run:
    """Model, tokenizer, optimizer and state (fresh, from `init_from`, or from `out/last` when resuming),
    and the data: the training corpus prepared on disk (`shards.prepare`, reused when current) and
    encoded with the checkpoint's tokenizer if there is one; the small validation set in memory."""
    cfg, out = recipe.train, Path(recipe.train.out_dir)
    torch.manual_seed(cfg.seed)
    valid_text = read_split(recipe.data, "val", limit=recipe.data.max_valid_pairs)
    state, checkpoint = TrainState(), None
    if resume:
        if not (out / "last").exists():
            raise UserError(f"{out / 'last'}: nothing to resume (no checkpoint was saved in {out})")
        checkpoint = load_checkpoint(out / "last")
        saved = checkpoint.trainer_state
        state = TrainState(**{k: v for k, v in saved.items() if k in TrainState.__dataclass_fields__})
    elif cfg.init_from:
        checkpoint = load_checkpoint(cfg.init_from)
    if checkpoint is not None:
        model, tokenizer = checkpoint.model, checkpoint.tokenizer
        train_data = prepare_recipe(recipe, tokenizer=tokenizer, model_max_len=model.config.max_len)
    else:
        train_data = prepare_recipe(recipe, tokenizer=None, model_max_len=recipe.model.max_len)
        tokenizer = train_data.tokenizer()
        model = Transformer(recipe.model_config(vocab_size=tokenizer.vocab_size, **_special_ids(tokenizer)))
    # fused: one kernel over all parameters instead of a Python loop per tensor (~14% of a small-model step)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=cfg.adam_betas, eps=cfg.adam_eps, fused=True)
    if resume:
        optimizer.load_state_dict(checkpoint.optimizer_state)
        torch.set_rng_state(checkpoint.trainer_state["rng.torch"])
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "recipe.json", json.dumps(recipe.to_dict(), indent=2) + "\n")
    return Run(
        recipe=recipe,
        out=out,
        model=model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        state=state,
        train_data=train_data,
        valid_data=encode(valid_text, tokenizer),
        valid_text=valid_text,
        log=MetricsLog(out / "metrics.jsonl", after_step=state.step),
        bar=Progress(cfg, step=state.step, elapsed=state.elapsed, enabled=progress),
    )


def _validate_and_save(run: Run) -> bool:
    """Validate, checkpoint, keep early-stopping count; True = patience is spent. Leaves the model training."""
    cfg, state = run.recipe.train, run.state
    metrics = evaluate(
        run.model, run.tokenizer, run.valid_data, run.valid_text.src, run.valid_text.tgt, recipe=run.recipe
    )
    current = metrics[f"val_{cfg.best_metric}"]
    improved = current > state.best_score
    if improved:
        state.best_score, state.best_step, state.bad_evals = current, state.step, 0
    else:
        state.bad_evals += 1
    run.log.write(step=state.step, epoch=state.epoch, **metrics)
    _save(run)
    run.bar.bar.write(
        f"step {state.step}: val_loss {metrics['val_loss']:.3f}  val_bleu {metrics['val_bleu']:.2f}"
        f"  val_chrf {metrics['val_chrf']:.2f}  (best {cfg.best_metric} {state.best_score:.2f} at step"
        f" {state.best_step})"
    )
    run.model.train()
    return bool(cfg.patience) and state.bad_evals >= cfg.patience


def _log_window(run: Run, window: Window) -> None:
    """Write the window's per-token loss, perplexity, learning rate and speed."""
    state = run.state
    rate = window.tokens / max(time.monotonic() - window.start, 1e-9)
    lr = run.optimizer.param_groups[0]["lr"]
    loss, nll = window.loss / window.tokens, window.nll / window.tokens
    run.log.write(
        step=state.step,
        epoch=state.epoch,
        train_loss=loss,
        train_ppl=math.exp(min(nll, 50)),
        lr=lr,
        tokens_per_s=rate,
        elapsed=state.elapsed,
    )
    run.bar.bar.set_postfix(step=state.step, loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:.0f}", epoch=state.epoch)


def _save(run: Run) -> None:
    """A new step checkpoint, then the `last` and `best` links, then pruning of old ones and of leftovers.
    `best` follows `state.best_step`, which also repairs it after a kill between the two link updates."""
    out, state = run.out, run.state
    path = save_checkpoint(
        out / "checkpoints" / f"step_{state.step:07d}",
        run.model,
        run.tokenizer,
        decode=run.recipe.decode,
        languages=(run.recipe.data.src_lang, run.recipe.data.tgt_lang),
        optimizer=run.optimizer,
        trainer_state=asdict(state),
    )
    update_link(out / "last", path)
    best = out / "checkpoints" / f"step_{state.best_step:07d}"
    if best.is_dir() and (out / "best").resolve() != best.resolve():
        update_link(out / "best", best)
    keep = {(out / name).resolve() for name in ("last", "best") if (out / name).exists()}
    steps = sorted((out / "checkpoints").glob("step_*"))
    for old in steps[: -run.recipe.train.keep_checkpoints]:
        if old.resolve() not in keep:
            remove_checkpoint(old)
    _remove_leftovers(run)


def _stop(run: Run, stop: StopRequest) -> None:
    """Checkpoint the update just done (unless validation just did) and raise `Stopped`: training has not
    ended, so no averaging and no curves (a resume makes them)."""
    path = run.out / "checkpoints" / f"step_{run.state.step:07d}"
    if (run.out / "last").resolve() != path.resolve():
        try:
            _save(run)
        except OSError as e:
            why = f"stopping on {stop.name}, could not save a checkpoint: {e.strerror}"
            raise OSError(e.errno, why, e.filename) from None
    run.bar.bar.close()
    raise Stopped(stop.name, run.state.step, path)


def _finish(run: Run) -> Path:
    run.bar.bar.close()
    _remove_leftovers(run)  # also when a resumed run had nothing left to do
    if n := run.recipe.train.average_last:  # section 6.1: the paper decodes the average of the last 5 (big: 20)
        steps = sorted((run.out / "checkpoints").glob("step_*"))[-n:]  # older ones kept only as `best` drop out
        average_checkpoints(steps, run.out / "averaged")
        log.info(f"averaged the last {len(steps)} checkpoints ({steps[0].name} to {steps[-1].name}) into averaged")
    plot_curves(run.out / "metrics.jsonl", run.out / "curves.png")
    return run.out


def _remove_leftovers(run: Run) -> None:
    """What a killed run (or a failed deletion) left behind: hidden, but it takes space."""
    for directory in (run.out, run.out / "checkpoints"):
        if directory.is_dir():
            remove_leftovers(directory)


def _special_ids(tokenizer: Tokenizer) -> dict[str, int]:
    return dict(pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
