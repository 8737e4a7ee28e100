import shlex

import pytest

from tnmt import quickstart
from tnmt.cli import build_parser
from tnmt.config import TrainConfig
from tnmt.quickstart import budget, next_steps, numbers_task


def test_numbers_task_holds_out_its_test_and_validation_numbers(tmp_path):
    recipe, test_src, test_tgt = numbers_task(tmp_path)
    lines = {name: (tmp_path / name).read_text().splitlines() for name in ("train.en", "valid.en", "test.en")}
    assert len(lines["test.en"]) == len(lines["valid.en"]) == 1000 and len(lines["train.en"]) > 15_000
    assert not set(lines["test.en"]) & set(lines["train.en"])
    assert not set(lines["valid.en"]) & set(lines["train.en"])
    assert "forty-two" in lines["train.en"] + lines["valid.en"] + lines["test.en"]  # every number < 1000
    assert len((tmp_path / "test.it").read_text().splitlines()) == 1000 and test_src == tmp_path / "test.en"
    assert test_tgt == tmp_path / "test.it" and recipe.data.train_src == str(tmp_path / "train.en")
    assert recipe.data.valid_tgt == str(tmp_path / "valid.it") and recipe.train.best_metric == "chrf"


def test_budget_is_said_in_words():
    assert budget(TrainConfig(max_steps=600)) == "up to 600 updates"
    assert budget(TrainConfig(max_steps=0, max_minutes=10.0)) == "up to 10 minutes"
    assert budget(TrainConfig(max_steps=50, max_minutes=2.5)) == "up to 2.5 minutes or 50 updates"


def test_with_multi30k_the_budget_is_the_minutes_given(tmp_path, monkeypatch, capsys):
    """The Multi30k branch trains for the time asked, with no update cap ("10 minutes / 0 steps" once)."""
    trained = []

    class Trained(Exception):
        pass

    def fake_train(recipe):
        trained.append(recipe.train)
        raise Trained

    monkeypatch.setattr(quickstart, "find_multi30k", lambda: tmp_path)
    monkeypatch.setattr(quickstart, "corpus_files", lambda data, split: (tmp_path / "src", tmp_path / "ref"))
    monkeypatch.setattr(quickstart, "train", fake_train)
    with pytest.raises(Trained):
        quickstart.quickstart(tmp_path / "out", minutes=10.0)
    (config,) = trained
    assert (config.max_minutes, config.max_steps) == (10.0, 0)
    assert capsys.readouterr().out.startswith("training on multi30k for up to 10 minutes; checkpoints")


def test_the_demo_ends_with_commands_on_its_run(tmp_path):
    """replay on the run, explain, inspect and serve on its best checkpoint, quoted for the shell, each parsing as
    shown."""
    run, sentence, reference = tmp_path / "my runs", "forty-two", "quarantadue"
    checkpoint = run / "best"
    text = next_steps(run, sentence, reference)
    commands = [shlex.split(line) for line in text.splitlines() if line.startswith("  tnmt ")]
    assert commands == [
        ["tnmt", "replay", "--run", str(run), sentence, "--reference", reference],
        ["tnmt", "explain", "--checkpoint", str(checkpoint), sentence],
        ["tnmt", "inspect", "--checkpoint", str(checkpoint), sentence],
        ["tnmt", "serve", "--checkpoint", str(checkpoint)],
    ]
    replay, explain, inspect, serve = (build_parser().parse_args(command[1:]) for command in commands)
    assert (replay.command, replay.run_dir, replay.sentence, replay.reference) == ("replay", run, sentence, reference)
    for parsed, name in ((explain, "explain"), (inspect, "inspect")):
        assert (parsed.command, parsed.checkpoint, parsed.sentence) == (name, checkpoint, sentence)
    assert (serve.command, serve.checkpoint) == ("serve", [checkpoint])
    assert '"Step through the search", "Inside the model" and "Watch it learn" views' in text
