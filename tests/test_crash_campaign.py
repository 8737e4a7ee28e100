"""The crash campaign in small: 10 kill -9s of `tnmt train` (benchmarks/crash_campaign.py), nothing lost."""

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the campaign forks its victims (POSIX only)")
def test_ten_kills_lose_nothing(repo_root, tmp_path):
    results = tmp_path / "crash_campaign.json"
    script = repo_root / "benchmarks" / "crash_campaign.py"
    command = [sys.executable, str(script), "--kills", "10", "--max-steps", "12", "--results", str(results)]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    result = json.loads(results.read_text())
    assert result["kills"] == 10 and result["failures"] == []
    assert result["chains_bit_identical"] == result["chains"] >= 2
    assert result["checkpoints_checked"] > 0  # how many depends on where the kills land
