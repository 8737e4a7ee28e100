"""Stopping training on a signal: a checkpoint of the last update, one line, a clean exit, an exact resume."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from tnmt.checkpoint import load_checkpoint
from tnmt.train.loop import train
from tnmt.train.stop import Stopped, StopRequest, stop_on_signals
from tnmt.translate.translator import Translator


def same_weights(a, b) -> None:
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name


def test_the_first_signal_sets_the_request_the_second_interrupts():
    # Python's own handler, as in a terminal: a shell starts background jobs with SIGINT ignored.
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with stop_on_signals() as request:
            assert not request
            signal.raise_signal(signal.SIGINT)
            assert request and request.name == "SIGINT"
            with pytest.raises(KeyboardInterrupt):  # the handler of before (Python's) is back and gets the signal
                signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)


def test_exit_status_follows_the_signal(tmp_path):
    assert Stopped("SIGTERM", 3, tmp_path).exit_status == 0
    assert Stopped("SIGINT", 3, tmp_path).exit_status == 130


def test_a_stop_request_saves_the_update_and_resumes_exactly(tiny_recipe, tmp_path):
    request = StopRequest()
    request.signum = signal.SIGTERM  # as if the signal came during the first update
    with pytest.raises(Stopped, match=r"stopped on SIGTERM after update 1: checkpoint .*step_0000001"):
        train(tiny_recipe(tmp_path / "b", "--train.max_steps=6"), progress=False, stop=request)
    assert (tmp_path / "b" / "last").resolve().name == "step_0000001"
    resumed = train(tiny_recipe(tmp_path / "b", "--train.max_steps=6"), resume=True, progress=False)
    straight = train(tiny_recipe(tmp_path / "a", "--train.max_steps=6"), progress=False)
    same_weights((straight / "last").resolve(), (resumed / "last").resolve())


def start_training(tiny_training, out) -> subprocess.Popen:
    """`tnmt train` with a budget it will not reach; returns once its first checkpoint exists."""
    empty = out.parent / "empty.toml"  # the overrides are the whole recipe
    empty.write_text("")
    cmd = [sys.executable, "-m", "tnmt", "train", str(empty), *tiny_training, f"--train.out_dir={out}"]
    proc = subprocess.Popen(
        [*cmd, "--no-progress", "--train.max_steps=100000", "--train.eval_every=4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    deadline = time.monotonic() + 120
    while not (out / "last").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_tnmt_train_stops_cleanly_on_a_signal(tiny_training, tiny_recipe, tmp_path, signum, status):
    out = tmp_path / "run"
    proc = start_training(tiny_training, out)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == status, stderr
    lines = [line for line in stderr.strip().splitlines() if ": INFO: " not in line]  # notes such as "prepared ..."
    assert len(lines) == 1 and lines[0].startswith(f"tnmt train: stopped on {signum.name} after update "), stderr
    stopped = load_checkpoint(out / "last")
    step = stopped.trainer_state["step"]
    assert lines[0].endswith(f"step_{step:07d} (continue with --resume)")
    assert len(Translator(stopped.model, stopped.tokenizer).translate(["one", "two"])) == 2
    if signum == signal.SIGTERM:  # the resume is the same code for both signals: check it once
        target = step + 3
        resumed = train(tiny_recipe(out, f"--train.max_steps={target}"), resume=True, progress=False)
        straight = train(tiny_recipe(tmp_path / "straight", f"--train.max_steps={target}"), progress=False)
        same_weights((straight / "last").resolve(), (resumed / "last").resolve())
