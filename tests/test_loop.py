"""The training loop on a tiny generated corpus: it learns, logs, checkpoints and resumes exactly."""

import json

import pytest
import torch
from safetensors.torch import load_file

from tnmt.checkpoint import load_checkpoint
from tnmt.errors import UserError
from tnmt.recipe import load_recipe
from tnmt.train.loop import train


def recipe(corpus, out, *overrides):
    data = [
        f"--data.{name}_{side}={corpus / f'{split}.{lang}'}"
        for name, split in (("train", "train"), ("valid", "valid"))
        for side, lang in (("src", "en"), ("tgt", "it"))
    ]
    return load_recipe(
        None,
        [
            "--data.corpus=files",
            "--data.vocab_size=300",
            *data,
            "--model.d_model=32",
            "--model.d_ff=64",
            "--model.n_heads=2",
            "--model.n_encoder_layers=1",
            "--model.n_decoder_layers=1",
            "--model.max_len=64",
            f"--train.out_dir={out}",
            "--train.max_tokens=400",
            "--train.warmup_steps=10",
            "--train.log_every=2",
            "--train.eval_every=4",
            "--train.threads=1",
            *overrides,
        ],
    )


def weights(path):
    return load_file(path / "model.safetensors")


def test_a_resumed_run_ends_with_the_same_weights(numbers_corpus, tmp_path):
    straight = train(recipe(numbers_corpus, tmp_path / "a", "--train.max_steps=12"), progress=False)
    train(recipe(numbers_corpus, tmp_path / "b", "--train.max_steps=8"), progress=False)
    assert load_checkpoint(tmp_path / "b" / "last").trainer_state["step"] == 8
    resumed = train(recipe(numbers_corpus, tmp_path / "b", "--train.max_steps=12"), resume=True, progress=False)
    a, b = weights((straight / "last").resolve()), weights((resumed / "last").resolve())
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    log_a = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    log_b = [json.loads(line) for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log_a] == [r["step"] for r in log_b]  # no duplicated lines after the resume
    assert [r.get("train_loss") for r in log_a] == [r.get("train_loss") for r in log_b]


def test_outputs_links_metrics_and_curves(numbers_corpus, tmp_path):
    out = train(
        recipe(numbers_corpus, tmp_path / "run", "--train.max_steps=12", "--train.keep_checkpoints=1"), progress=False
    )
    assert (out / "best").is_symlink() and (out / "last").is_symlink()
    assert (out / "curves.png").stat().st_size > 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if "val_bleu" in r]
    assert [r["step"] for r in evals] == [4, 8, 12]
    train_losses = [r["train_loss"] for r in records if "train_loss" in r]
    assert train_losses[-1] < train_losses[0]
    kept = {p.name for p in (out / "checkpoints").iterdir()}
    assert kept == {(out / "best").resolve().name, (out / "last").resolve().name}


def test_best_follows_the_chosen_validation_metric(numbers_corpus, tmp_path):
    out = train(
        recipe(numbers_corpus, tmp_path / "chrf", "--train.max_steps=12", "--train.best_metric=chrf"), progress=False
    )
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if "val_chrf" in line]
    best = max(evals, key=lambda r: r["val_chrf"])  # the first of equals: only a strictly better score moves best
    assert load_checkpoint(out / "best").trainer_state["step"] == best["step"]
    assert load_checkpoint(out / "best").trainer_state["best_score"] == best["val_chrf"]


def test_resume_without_a_checkpoint_is_a_clear_error(numbers_corpus, tmp_path):
    with pytest.raises(UserError, match="nothing to resume"):
        train(recipe(numbers_corpus, tmp_path / "none", "--train.max_steps=2"), resume=True, progress=False)


def test_fine_tuning_starts_from_a_checkpoint(numbers_corpus, tmp_path):
    first = train(recipe(numbers_corpus, tmp_path / "pre", "--train.max_steps=4"), progress=False)
    tuned = train(
        recipe(numbers_corpus, tmp_path / "ft", "--train.max_steps=4", f"--train.init_from={first / 'last'}"),
        progress=False,
    )
    before, after = load_checkpoint(first / "last"), load_checkpoint(tuned / "last")
    assert after.model.config == before.model.config
    assert after.tokenizer.vocab_size == before.tokenizer.vocab_size
