"""End to end through the `tnmt` command on a few hundred Multi30k lines: train, kill, resume,
translate, evaluate, average; and the one-line errors with exit status 2."""

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tnmt.checkpoint import load_checkpoint


def tnmt(*args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tnmt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


@pytest.fixture(scope="module")
def small_corpus(multi30k_dir, tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("m30k")
    for split, n in (("train", 400), ("val", 40)):
        for lang in ("en", "de"):
            with gzip.open(multi30k_dir / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                lines = [next(f) for _ in range(n)]
            (directory / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
    recipe = f"""
[data]
corpus = "files"
train_src = "{directory / "train.en"}"
train_tgt = "{directory / "train.de"}"
valid_src = "{directory / "val.en"}"
valid_tgt = "{directory / "val.de"}"
vocab_size = 500

[model]
d_model = 32
d_ff = 64
n_heads = 2
n_encoder_layers = 1
n_decoder_layers = 1

[train]
max_tokens = 500
warmup_steps = 20
eval_every = 5
log_every = 5
threads = 1
"""
    (directory / "recipe.toml").write_text(recipe)
    return directory


def test_train_kill_resume_translate_evaluate_average(small_corpus, tmp_path):
    out = tmp_path / "run"
    recipe = str(small_corpus / "recipe.toml")
    cmd = [
        sys.executable,
        "-m",
        "tnmt",
        "train",
        recipe,
        "--train.max_steps=100000",
        f"--train.out_dir={out}",
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while not (out / "last").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(0.5)  # likely mid-way through the next steps, maybe mid-save
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = load_checkpoint(out / "last").trainer_state["step"]
    assert saved >= 5

    target = saved + 5
    result = tnmt("train", recipe, "--resume", f"--train.max_steps={target}", f"--train.out_dir={out}", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert load_checkpoint(out / "last").trainer_state["step"] == target

    result = tnmt(
        "translate",
        "--checkpoint",
        str(out / "best"),
        "--beam-size",
        "2",
        stdin="A man is sleeping.\n\nTwo dogs run on the grass.\n",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # alignment kept, empty line stays empty
    result = tnmt("translate", "--checkpoint", str(out / "best"), "--quantize", "int8", stdin="A man is sleeping.\n\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 2 and result.stdout.endswith("\n\n")

    result = tnmt(
        "evaluate",
        "--checkpoint",
        str(out / "best"),
        "--src",
        str(small_corpus / "val.en"),
        "--ref",
        str(small_corpus / "val.de"),
        "--beam-size",
        "1",
    )
    assert result.returncode == 0, result.stderr
    assert "BLEU = " in result.stdout and "nrefs:1|case:mixed" in result.stdout and "chrF = " in result.stdout

    steps = sorted((out / "checkpoints").iterdir())
    result = tnmt("average", *map(str, steps[-2:]), "--out", str(tmp_path / "avg"))
    assert result.returncode == 0, result.stderr
    assert load_checkpoint(tmp_path / "avg").model.config == load_checkpoint(out / "last").model.config


def one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_bad_inputs_give_one_line_errors(small_corpus, tmp_path):
    recipe = str(small_corpus / "recipe.toml")
    one_line_error(tnmt("train", recipe, "--train.max_stesp=3"), "unknown key 'max_stesp'", "max_steps")
    one_line_error(tnmt("train", recipe, "--model.d_model=33", "--train.out_dir=" + str(tmp_path)), "d_model = 33")
    bad = tmp_path / "bad.en"
    bad.write_bytes(b"fine\n\xff\xfe broken\n")
    one_line_error(
        tnmt("train", recipe, f"--data.train_src={bad}", f"--train.out_dir={tmp_path / 'x'}"),
        f"{bad}:2: invalid UTF-8",
    )
    one_line_error(tnmt("train", recipe, f"--train.out_dir={tmp_path / 'y'}", "--resume"), "nothing to resume")
    one_line_error(tnmt("translate", "--checkpoint", str(tmp_path / "nope")), "no such checkpoint directory")


def test_evaluate_line_count_mismatch(small_corpus, tmp_path):
    out = tmp_path / "run"
    result = tnmt(
        "train",
        str(small_corpus / "recipe.toml"),
        "--train.max_steps=2",
        f"--train.out_dir={out}",
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    one_line_error(
        tnmt(
            "evaluate",
            "--checkpoint",
            str(out / "last"),
            "--src",
            str(small_corpus / "val.en"),
            "--ref",
            str(small_corpus / "train.de"),
        ),
        "40 lines",
        "400",
    )


def test_data_multi30k_copies_a_local_mirror(multi30k_dir, tmp_path):
    result = tnmt("data", "multi30k", "--out", str(tmp_path / "m"), "--from", str(multi30k_dir), "--langs", "en", "de")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "m" / "train.de.gz").read_bytes() == (multi30k_dir / "train.de.gz").read_bytes()


def test_offline_quickstart_runs_the_whole_pipeline(tmp_path):
    result = tnmt("quickstart", "--offline", "--steps", "30", "--out", str(tmp_path / "q"))
    assert result.returncode == 0, result.stderr
    assert "running the offline number-words task" in result.stdout
    assert "BLEU = " in result.stdout
    assert list((tmp_path / "q" / "attention").glob("*.png"))
    assert (tmp_path / "q" / "run" / "curves.png").exists()
