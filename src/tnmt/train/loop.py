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
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from tnmt.data.batching import TokenBatchSampler, collate
from tnmt.data.dataset import EncodedPairs, encode, read_split, train_tokenizer
from tnmt.data.tokenizer import Tokenizer
from tnmt.decode.translator import Translator
from tnmt.errors import UserError
from tnmt.evaluate import score
from tnmt.io import atomic_write_text
from tnmt.model import Transformer
from tnmt.recipe import Recipe, recipe_to_dict
from tnmt.train.checkpoint import load_checkpoint, save_checkpoint, update_link
from tnmt.train.loss import label_smoothed_loss
from tnmt.train.schedule import inverse_sqrt_lr
from tnmt.visualize import plot_curves


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


def train(recipe: Recipe, *, resume: bool = False, progress: bool = True) -> Path:
    """Train as the recipe says and return the output directory (with `best` and `last` links)."""
    cfg = recipe.train
    out = Path(cfg.out_dir)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    model, tokenizer, optimizer, state = _start(recipe, out, resume)
    train_raw = read_split(recipe.data, "train", limit=recipe.data.max_train_pairs)
    valid_raw = read_split(recipe.data, "val", limit=recipe.data.max_valid_pairs)
    train_data = encode(
        train_raw, tokenizer, max_len=min(recipe.data.max_tokens_per_sentence, model.config.max_len - 1)
    )
    valid_data = encode(valid_raw, tokenizer)
    sampler = TokenBatchSampler(train_data.lengths(), max_tokens=cfg.max_tokens, seed=cfg.seed)
    log = _MetricsLog(out / "metrics.jsonl", after_step=state.step)
    bar = tqdm(total=cfg.max_steps or None, initial=state.step, disable=not progress, unit="step", dynamic_ncols=True)
    ids = dict(pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)

    def validate_and_save() -> bool:
        """Validation loss, BLEU and chrF, checkpoint, early-stopping bookkeeping; True = stop now."""
        metrics = evaluate(model, tokenizer, valid_data, valid_raw.src, valid_raw.tgt, recipe=recipe)
        current = metrics[f"val_{cfg.best_metric}"]
        improved = current > state.best_score
        if improved:
            state.best_score, state.best_step, state.bad_evals = current, state.step, 0
        else:
            state.bad_evals += 1
        log.write(step=state.step, epoch=state.epoch, **metrics)
        _save(out, model, tokenizer, optimizer, state, recipe, best=improved)
        bar.write(
            f"step {state.step}: val_loss {metrics['val_loss']:.3f}  val_bleu {metrics['val_bleu']:.2f}"
            f"  val_chrf {metrics['val_chrf']:.2f}  (best {cfg.best_metric} {state.best_score:.2f} at step"
            f" {state.best_step})"
        )
        return bool(cfg.patience) and state.bad_evals >= cfg.patience

    started, window_start = time.monotonic() - state.elapsed, time.monotonic()
    window_tokens = window_loss = window_nll = 0.0  # sums since the last log line
    model.train()
    while True:
        batches = sampler.batches(state.epoch)
        while state.batch_index < len(batches):
            group = batches[state.batch_index : state.batch_index + cfg.accum_steps]
            loss, nll, n_tokens = _update(
                model,
                optimizer,
                [collate(train_data.pairs(b), **ids) for b in group],
                recipe=recipe,
                step=state.step + 1,
            )
            state.step += 1
            state.batch_index += len(group)
            state.elapsed = time.monotonic() - started
            window_tokens, window_loss, window_nll = window_tokens + n_tokens, window_loss + loss, window_nll + nll
            if state.step % cfg.log_every == 0:
                rate = window_tokens / max(time.monotonic() - window_start, 1e-9)
                lr = optimizer.param_groups[0]["lr"]
                loss, nll = window_loss / window_tokens, window_nll / window_tokens  # per token, whole window
                log.write(
                    step=state.step,
                    epoch=state.epoch,
                    train_loss=loss,
                    train_ppl=math.exp(min(nll, 50)),
                    lr=lr,
                    tokens_per_s=rate,
                    elapsed=state.elapsed,
                )
                bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:.0f}", epoch=state.epoch)
                window_tokens = window_loss = window_nll = 0.0
                window_start = time.monotonic()
            bar.update(1)
            out_of_budget = (cfg.max_steps and state.step >= cfg.max_steps) or (
                cfg.max_minutes and state.elapsed >= 60 * cfg.max_minutes
            )
            if out_of_budget or (cfg.eval_every and state.step % cfg.eval_every == 0):
                if validate_and_save() or out_of_budget:
                    return _finish(out, bar, state)
                model.train()
        state.epoch, state.batch_index = state.epoch + 1, 0
        if not cfg.eval_every and validate_and_save():
            return _finish(out, bar, state)
        if cfg.max_epochs and state.epoch >= cfg.max_epochs:
            if cfg.eval_every:
                validate_and_save()
            return _finish(out, bar, state)
        model.train()


def _update(
    model: Transformer, optimizer: torch.optim.Optimizer, batches: list, *, recipe: Recipe, step: int
) -> tuple[float, float, int]:
    """One optimizer update over (possibly several accumulated) batches; returns summed loss, NLL, tokens."""
    cfg = recipe.train
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
    """Validation loss (per token, teacher-forced, no smoothing), sacreBLEU and chrF of decoded sources."""
    model.eval()
    ids = dict(pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
    sampler = TokenBatchSampler(data.lengths(), max_tokens=recipe.train.max_tokens, seed=0, shuffle=False)
    total_nll, total_tokens = 0.0, 0
    for indices in sampler.batches(0):
        batch = collate(data.pairs(indices), **ids)
        _, nll = label_smoothed_loss(model(batch.src, batch.tgt_in), batch.tgt_out, epsilon=0.0, pad_id=ids["pad_id"])
        total_nll, total_tokens = total_nll + nll.item(), total_tokens + batch.n_tgt_tokens
    d = recipe.decode
    hypotheses = Translator(model, tokenizer).translate(
        sources, beam_size=recipe.train.eval_beam_size, length_penalty=d.length_penalty
    )
    val_loss = total_nll / max(total_tokens, 1)
    scores = score(hypotheses, references)
    return {
        "val_loss": val_loss,
        "val_ppl": math.exp(min(val_loss, 50)),
        "val_bleu": scores.bleu,
        "val_chrf": scores.chrf,
    }


def _start(recipe: Recipe, out: Path, resume: bool):
    """Model, tokenizer, optimizer and state: fresh, from `init_from`, or from `out/last` when resuming."""
    cfg = recipe.train
    torch.manual_seed(cfg.seed)
    state = TrainState()
    checkpoint = None
    if resume:
        if not (out / "last").exists():
            raise UserError(f"{out / 'last'}: nothing to resume (no checkpoint was saved in {out})")
        checkpoint = load_checkpoint(out / "last")
        fields = {k: v for k, v in checkpoint.trainer_state.items() if k in TrainState.__dataclass_fields__}
        state = TrainState(**fields)
    elif cfg.init_from:
        checkpoint = load_checkpoint(cfg.init_from)
    if checkpoint is not None:
        model, tokenizer = checkpoint.model, checkpoint.tokenizer
    else:
        tokenizer = train_tokenizer(recipe.data, read_split(recipe.data, "train", limit=recipe.data.max_train_pairs))
        ids = dict(pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
        model = Transformer(recipe.model_config(vocab_size=tokenizer.vocab_size, **ids))
    # fused: one kernel over all parameters instead of a Python loop per tensor (~14% of a small-model step)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=cfg.adam_betas, eps=cfg.adam_eps, fused=True)
    if resume:
        optimizer.load_state_dict(checkpoint.optimizer_state)
        torch.set_rng_state(checkpoint.trainer_state["rng.torch"])
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "recipe.json", json.dumps(recipe_to_dict(recipe), indent=2) + "\n")
    return model, tokenizer, optimizer, state


def _save(
    out: Path,
    model: Transformer,
    tokenizer: Tokenizer,
    optimizer: torch.optim.Optimizer,
    state: TrainState,
    recipe: Recipe,
    *,
    best: bool,
) -> None:
    """A new step checkpoint, then the `last` (and maybe `best`) links, then pruning of old ones."""
    path = save_checkpoint(
        out / "checkpoints" / f"step_{state.step:07d}",
        model,
        tokenizer,
        optimizer=optimizer,
        trainer_state=asdict(state),
    )
    update_link(out / "last", path)
    if best:
        update_link(out / "best", path)
    keep = {(out / name).resolve() for name in ("last", "best") if (out / name).exists()}
    steps = sorted((out / "checkpoints").glob("step_*"))
    for old in steps[: -recipe.train.keep_checkpoints]:
        if old.resolve() not in keep:
            shutil.rmtree(old, ignore_errors=True)


def _finish(out: Path, bar: tqdm, state: TrainState) -> Path:
    bar.close()
    plot_curves(out / "metrics.jsonl", out / "curves.png")
    return out


class _MetricsLog:
    """metrics.jsonl, one JSON object per line; on resume, lines past the checkpoint's step are dropped."""

    def __init__(self, path: Path, *, after_step: int) -> None:
        self.path = path
        if path.exists():
            kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= after_step]
            atomic_write_text(path, "".join(line + "\n" for line in kept))

    def write(self, **record: float) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
