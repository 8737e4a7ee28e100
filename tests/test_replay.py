"""views/replay.py and `tnmt replay`: a sentence through the models a tiny run kept, each the same translation
`tnmt translate` gives with that model, the attention the same as `tnmt inspect` draws, and the bad inputs."""

import json
import shutil
from dataclasses import replace

import pytest
import torch

from tnmt.errors import UserError
from tnmt.train.loop import is_snapshot_step
from tnmt.train.run_dir import RunDir, run_of
from tnmt.translate.translator import Translator
from tnmt.views.inside import inside
from tnmt.views.replay import format_replay, replay, replay_dict

SENTENCE = "two hundred and five"


@pytest.fixture(scope="module")
def run(tiny_run):
    """conftest's tiny run (8 updates; models kept at 1, 2, 4 and 8), under a shorter name."""
    return tiny_run


def test_snapshots_are_log_spaced_from_the_first():
    assert [s for s in range(1, 500) if is_snapshot_step(s, 25)] == [25, 50, 100, 200, 400]
    assert not any(is_snapshot_step(s, 0) for s in range(1, 100))


def test_a_run_keeps_its_snapshots_and_its_last_checkpoints(run):
    kept = RunDir(run).kept_models()
    assert [(k.step, k.kind) for k in kept] == [(1, "snapshot"), (2, "snapshot"), (4, "checkpoint"), (8, "checkpoint")]
    assert not (run / "snapshots" / "step_0000001" / "optimizer.safetensors").exists()  # weights alone
    assert run_of(run / "best") == run_of(run) == run_of(run / "checkpoints" / "step_0000008") == run


def test_each_moment_translates_as_its_model_and_attends_as_inspect_draws(run):
    found = replay(run, SENTENCE, reference="duecentocinque")
    assert [m.step for m in found.moments] == [1, 2, 4, 8]
    for moment, kept in zip(found.moments, RunDir(run).kept_models(), strict=True):
        translator = Translator.from_checkpoint(kept.path)
        assert moment.beam == translator.translate([SENTENCE])[0]  # what `tnmt translate` prints
        assert moment.greedy == translator.translate([SENTENCE], replace(translator.decode, beam_size=1))[0]
        look = inside(translator, SENTENCE, translator.decode)
        layer = moment.attention.layer - 1
        assert moment.attention.target == look.next_pieces and moment.attention.source == look.source_pieces
        heads = look.forward.cross_attention[layer]
        expected = heads.mean(dim=0) if moment.attention.head == 0 else heads[moment.attention.head - 1]
        torch.testing.assert_close(torch.tensor(moment.attention.weights), expected.float(), atol=1e-4, rtol=0)
        assert len(moment.words) == len(moment.word_probs) and moment.reference_log_prob < 0
    assert found.moments[1].metrics["train_loss"] > 0  # logged every 2 updates
    assert "val_bleu" in found.moments[2].metrics and "val_bleu" not in found.moments[1].metrics
    assert [point[0] for point in found.curves["val_loss"]] == [4, 8]


def test_the_text_and_json_views(run, capsys):
    from tnmt.cli import main

    found = replay(run, SENTENCE)
    text = format_replay(found)
    assert text.startswith(f"run: {run}: 4 kept models, updates 1 to 8") and text.count("\nstep ") == 4
    assert main(["replay", "--run", str(run), SENTENCE, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer == json.loads(json.dumps(replay_dict(found)))
    assert [m["step"] for m in answer["moments"]] == [1, 2, 4, 8] and answer["reference"] is None


def test_a_pruned_run_a_run_of_one_model_and_a_run_without_metrics(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    shutil.rmtree(copy / "snapshots" / "step_0000002")
    (copy / "metrics.jsonl").unlink()
    found = replay(copy, SENTENCE)
    assert [m.step for m in found.moments] == [1, 4, 8] and all(m.metrics == {} for m in found.moments)
    assert RunDir(copy).records() == [] and found.curves == {key: [] for key in found.curves}
    shutil.rmtree(copy / "snapshots")
    shutil.rmtree(copy / "checkpoints" / "step_0000004")  # `best` now names nothing: a run of one model
    assert [m.step for m in replay(copy, SENTENCE).moments] == [8]


def test_a_multilingual_run_replays_the_chosen_pair(multi_checkpoint, tmp_path):
    run = tmp_path / "multi"
    (run / "snapshots").mkdir(parents=True)
    (run / "snapshots" / "step_0000010").symlink_to(multi_checkpoint, target_is_directory=True)
    found = replay(run, "two hundred", source="en", target="de")
    expected = Translator.from_checkpoint(multi_checkpoint).for_pair("en", "de").translate(["two hundred"])[0]
    assert (found.source, found.target, found.moments[0].beam) == ("en", "de", expected)
    with pytest.raises(UserError, match="de-it"):
        replay(run, "zwei", source="de", target="it")


def test_bad_input_is_one_line_naming_what(run, tmp_path, capsys):
    from tnmt.cli import main

    cases = [
        (tmp_path / "nowhere", SENTENCE, "no such directory"),
        (tmp_path, SENTENCE, "not a training run (no checkpoints/step_* or snapshots/step_* in it)"),
        (run, "  ", "the sentence is empty"),
        (run, "one " * 200, "characters: over 500"),
        (run, "two hundred. Five hundred.", "a replay follows one sentence: this text has several"),
    ]
    for directory, sentence, message in cases:
        assert main(["replay", "--run", str(directory), sentence]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    with pytest.raises(UserError, match="both source and target"):
        replay(run, SENTENCE, source="en")


def test_a_moment_reads_its_sentence_once_as_translate_reads_it(run, monkeypatch):
    """A list marker is copied by `tnmt translate`, never read: the replay's words, their probabilities and the
    attention all come from the one translation of what the model reads, and each kept model runs one beam search
    and one greedy search (the look inside reuses the beam's)."""
    from tnmt.translate.door import ModelDoor

    text = "- " + SENTENCE
    searches = []
    search = ModelDoor.search
    monkeypatch.setattr(ModelDoor, "search", lambda self, *a, **k: searches.append(1) or search(self, *a, **k))
    found = replay(run, text)
    assert len(searches) == 2 * len(found.moments)
    monkeypatch.undo()
    for moment, kept in zip(found.moments, RunDir(run).kept_models(), strict=True):
        translator = Translator.from_checkpoint(kept.path)
        assert moment.beam == translator.translate([text])[0]  # the marker copied, as `tnmt translate` prints
        look = inside(translator, SENTENCE, translator.decode)  # what the model reads of the line
        assert moment.attention.source == look.source_pieces and moment.attention.target == look.next_pieces
        assert moment.words == look.translation.split() and len(moment.word_probs) == len(moment.words)
