"""The crash campaign in small: kill -9s of `tnmt train` (benchmarks/robustness/crash_campaign.py), nothing lost; one
process (10 kills) and under torchrun with 2 processes (4 kills)."""

import json
import os
import subprocess
import sys

import pytest
import torch.distributed as dist

GLOO = dist.is_available() and dist.is_gloo_available()


def run_campaign(repo_root, results, *options: str) -> dict:
    command = [sys.executable, "-m", "benchmarks.robustness.crash_campaign", *options, "--results", str(results)]
    finished = subprocess.run(command, cwd=repo_root, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    return json.loads(results.read_text())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the campaign forks its victims (POSIX only)")
def test_ten_kills_lose_nothing(repo_root, tmp_path):
    result = run_campaign(repo_root, tmp_path / "crash_campaign.json", "--kills", "10", "--max-steps", "12")
    assert result["kills"] == 10 and result["failures"] == []
    assert result["chains_bit_identical"] == result["chains"] >= 2
    assert result["checkpoints_checked"] > 0  # how many depends on where the kills land


@pytest.mark.skipif(not (hasattr(os, "fork") and GLOO), reason="needs POSIX and torch.distributed with gloo")
def test_four_kills_under_torchrun_lose_nothing(repo_root, tmp_path):
    options = ["--torchrun", "--kills", "4", "--kills-per-chain", "4", "--max-steps", "12"]
    result = run_campaign(repo_root, tmp_path / "crash_campaign_torchrun.json", *options)
    assert result["kills"] == 4 and result["failures"] == []
    assert sum(result["kills_by_target"].values()) == 4
    assert set(result["kills_by_target"]) <= {"rank0", "rank1", "launch"}
    assert result["chains_bit_identical"] == result["chains"] >= 1
