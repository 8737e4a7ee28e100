"""benchmarks/quality/levers.py without training: arms' overrides, the exact-update command, the runner's deadline
and the record of a run (its curve, its updates, its scores or why there are none)."""

import argparse
import json
import sys

import pytest

from benchmarks.quality import levers


def test_overrides_go_to_their_arm_and_unnamed_ones_to_every_arm():
    arms = levers.arm_overrides(
        ["base", "bi"], ["train.guided_alignment=0", "bi:data.first_direction_from=0.33", 'bi:data.languages=["en"]']
    )
    assert arms == {
        "base": ["train.guided_alignment=0"],
        "bi": ["train.guided_alignment=0", "data.first_direction_from=0.33", 'data.languages=["en"]'],
    }


def test_an_override_for_an_unknown_arm_is_refused():
    with pytest.raises(SystemExit, match=r"--set bd:data.x=1: no arm named 'bd' \(arms: base, bi\)"):
        levers.arm_overrides(["base", "bi"], ["bd:data.x=1"])


def test_each_arm_trains_to_its_update_budget_with_no_clock(tmp_path):
    command = levers.train_command("r.toml", ["data.x=1"], 8800, 2, tmp_path / "bi_s2")
    assert command[1:5] == ["-m", "tnmt.cli", "train", "r.toml"]
    assert command[-5:] == [
        "--data.x=1",
        "--train.max_steps=8800",
        "--train.max_minutes=0",  # a share of the budget then counts updates, as in a timed run of that many
        "--train.seed=2",
        f"--train.out_dir={tmp_path / 'bi_s2'}",
    ]


def test_commands_run_to_their_end_or_are_stopped_at_the_deadline(tmp_path):
    quick = [sys.executable, "-c", "print('done')"]
    slow = [sys.executable, "-c", "import time; time.sleep(60)"]
    status = levers.run_all([("a", quick, tmp_path / "a.log"), ("b", slow, tmp_path / "b.log")], 2, deadline_s=2)
    assert status["a"] == 0 and status["b"] < 0  # b ended by SIGTERM
    assert (tmp_path / "a.log").read_text() == "done\n"


def test_a_run_is_recorded_with_its_curve_updates_and_scores(tmp_path):
    run = tmp_path / "base_s1"
    run.mkdir()
    rows = [{"step": 250, "train_loss": 3.0}, {"step": 250, "val_bleu": 20.123, "val_loss": 2.5}, {"step": 300}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "base_s1.score").write_text('{"best_beam4": {"tok_lc_bleu": 21.5}}\n')
    entry = levers.run_entry(tmp_path, "base_s1", "base", 1, 0)
    assert entry == {
        "arm": "base",
        "seed": 1,
        "exit": 0,
        "val_curve": [{"step": 250, "bleu": 20.12, "loss": 2.5}],
        "updates": 300,
        "best_beam4": {"tok_lc_bleu": 21.5},
    }


def test_a_run_without_scores_says_what_its_scoring_printed(tmp_path):
    (tmp_path / "bi_s1.score").write_text("Traceback ...\nValueError: no best\n")
    entry = levers.run_entry(tmp_path, "bi_s1", "bi", 1, -15)
    assert entry == {"arm": "bi", "seed": 1, "exit": -15, "score_error": "Traceback ...\nValueError: no best"}


def test_arms_and_a_step_budget_are_required(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["levers.py", "--steps", "5"])
    with pytest.raises(SystemExit):
        levers.main()
    assert "--arm (at least one) and --steps (positive) are required" in capsys.readouterr().err


def test_the_result_holds_every_runs_curve_before_any_is_scored(tmp_path):
    run = tmp_path / "base_s1"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 250, "val_bleu": 20.0, "val_loss": 2.5}) + "\n")
    args = argparse.Namespace(recipe="r.toml", steps=500, out=tmp_path, result=tmp_path / "out" / "levers.json")
    results = levers.write_results(args, {"base": []}, {"base_s1": ("base", 1)}, {"base_s1": -15}, 61.04)
    assert json.loads(args.result.read_text()) == results
    assert results["train_seconds"] == 61.0 and results["runs"]["base_s1"]["val_curve"] == [
        {"step": 250, "bleu": 20.0, "loss": 2.5}
    ]
    assert results["runs"]["base_s1"]["exit"] == -15 and "best_beam4" not in results["runs"]["base_s1"]
