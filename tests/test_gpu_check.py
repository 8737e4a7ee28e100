"""benchmarks/gpu/gpu_check.py, issue 43's one command for a GPU machine, checked where there is none: its one-line
refusal, its dry run (every section on the CPU at tiny sizes), a failure recorded without losing the rest, and
the FLOP count its MFU divides by."""

import json
import subprocess
import sys

import pytest
import torch

from benchmarks.gpu import gpu_check
from benchmarks.speed import train_speed
from tnmt.config import ModelConfig
from tnmt.data.batching import collate

SECTIONS = ["tests", "base_shape", "multi30k", "decode", "serve"]


def run(*args: str, timeout: float, module: str = "benchmarks.gpu.gpu_check") -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` from the repository root, as the scripts are run."""
    command = [sys.executable, "-m", module, *args]
    return subprocess.run(command, cwd=gpu_check.REPO, capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_without_a_gpu_it_stops_with_one_line(tmp_path):
    result = run("--out", str(tmp_path / "check.json"), timeout=60)
    assert result.returncode == 2
    assert result.stderr == (
        "gpu_check: error: PyTorch sees no CUDA GPU (torch.cuda.is_available() is False); "
        "--dry-run checks the script on the CPU\n"
    )
    assert not (tmp_path / "check.json").exists()


def test_the_dry_run_fills_every_section(multi30k_dir, tmp_path):
    out = tmp_path / "check.json"
    result = run(
        "--dry-run", "--out", str(out), "--data", str(multi30k_dir), "--work", str(tmp_path / "w"), timeout=600
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    sections = report["sections"]
    assert {name: section["status"] for name, section in sections.items()} == dict.fromkeys(SECTIONS, "ok")
    lines = [line for line in result.stderr.splitlines() if line.startswith("gpu_check: ")]  # one per section
    assert len(lines) == len(SECTIONS) + 1 and lines[-1].endswith("all sections ok")
    tests, base, m30k = sections["tests"], sections["base_shape"], sections["multi30k"]
    assert "tests/test_device.py" in tests["files"] and tests["passed"] > 0 and tests["failed"] == 0
    assert tests["skipped"] > 0  # the CUDA-only tests, on this machine
    for setting in ("without_activation_checkpointing", "with_activation_checkpointing"):
        assert base[setting]["target_tokens_per_s"] > 0 and base[setting]["mfu"] > 0
    assert m30k["updates"] == 4 and [point["step"] for point in m30k["val_curve"]] == [2, 4]
    assert m30k["test_2016_flickr_beam4"]["checkpoint"] == "step_0000004"
    assert [cpu["file"] for cpu in m30k["cpu_runs"]] == list(gpu_check.CPU_TRAINING)
    for search in ("greedy", "beam4"):
        decoded = sections["decode"][search]
        assert decoded["differing_lines"] == 0 and decoded["gpu"]["sentences_per_s"] > 0  # "gpu": the CPU here
    assert sections["decode"]["attention"]["pictures"] > 0
    for mode in ("batching", "no-batching"):
        served = sections["serve"][mode]
        assert served["ok"] > 0 and not served["errors"] and served["exit_code_after_sigterm"] == 0


def test_a_failure_is_recorded_in_one_line_with_its_detail():
    def section() -> dict:
        gpu_check.child(
            [sys.executable, "-c", "import sys; print('a warning', file=sys.stderr); sys.exit('boom')"], timeout=60
        )
        return {"never": "here"}

    result = gpu_check.guarded(section)
    assert (
        result["status"] == "failed"
        and result["error"] == "benchmarks.gpu.gpu_check.ChildFailed: -c exited with 1: boom"
    )
    assert result["detail"] == "a warning\nboom\n" and result["at"].startswith("gpu_check.py:")
    section = {"status": "ok", "a": {"status": "ok"}, "b": gpu_check.guarded(lambda: 1 / 0)}
    assert gpu_check.failed_if_a_part_failed(section)["error"] == "b: ZeroDivisionError: division by zero"


def test_model_flops_are_counted_as_train_speed_counts_them():
    config = ModelConfig.small(src_vocab_size=train_speed.VOCAB, tgt_vocab_size=train_speed.VOCAB)
    shape = (config.d_model, config.d_ff, config.n_encoder_layers, config.n_decoder_layers)
    assert shape == (train_speed.D, train_speed.FFN, train_speed.LAYERS, train_speed.LAYERS)
    batch = collate([([5] * 6, [7] * 3), ([5] * 2, [7] * 9)], pad_id=0, bos_id=1, eos_id=2)
    lengths = [(7, 4), (3, 10)]  # (source, target) tokens with EOS, padding left out
    assert gpu_check.model_flops(config, batch) == train_speed.model_flops(lengths)


_SPEED = "benchmarks.gpu.gpu_speed"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_gpu_speed_without_a_gpu_stops_with_one_line(tmp_path):
    result = run("--out", str(tmp_path / "speed.json"), timeout=60, module=_SPEED)
    assert result.returncode == 2 and result.stderr.startswith("gpu_speed: error: PyTorch sees no CUDA GPU")
    assert not (tmp_path / "speed.json").exists()


def test_gpu_speed_dry_run_measures_every_lever_and_compares_the_curves(multi30k_dir, tmp_path):
    """issue 55's command on the CPU at tiny sizes: every setting of the levers measured, three short runs of
    the recipe logged and compared (the new path equals today's here: the CPU run compiles nothing)."""
    out = tmp_path / "speed.json"
    options = ["--dry-run", "--out", str(out), "--data", str(multi30k_dir), "--work", str(tmp_path / "w")]
    result = run(*options, timeout=600, module=_SPEED)
    assert result.returncode == 0, result.stderr
    sections = json.loads(out.read_text())["sections"]
    assert {name: section["status"] for name, section in sections.items()} == dict.fromkeys(
        ["levers", "loss_curve", "big_shape"], "ok"
    )
    levers = sections["levers"]
    for name in ("today", "loss_blocks", "no_sync", "compile", "no_fused_adam", "no_fused_attention", "all"):
        assert levers[name]["target_tokens_per_s"] > 0 and levers[name]["mfu"] > 0, name
    assert levers["all"]["levers"] == {
        "loss_blocks": True,
        "no_sync": True,
        "compile": True,
        "fused_adam": True,
        "fused_attention": True,
    }
    curve = sections["loss_curve"]
    assert list(curve["today"]["train_loss"]) == ["2", "4"] and curve["new_vs_today"]["max_abs"] == 0.0
    assert curve["seed_2_vs_today"]["max_abs"] > 0 and curve["new_within_seed_noise"]
    assert set(sections["big_shape"]) >= {"today", "all"}
