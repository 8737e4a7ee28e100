import json
import re
from dataclasses import asdict

import pytest
import torch

from tnmt import ModelConfig, Transformer
from tnmt.checkpoint import (
    average_checkpoints,
    load_checkpoint,
    read_model_json,
    remove_checkpoint,
    save_checkpoint,
    update_link,
    write_model_json,
)
from tnmt.config import DecodeConfig
from tnmt.data.tokenizer import Tokenizer
from tnmt.errors import UserError
from tnmt.io import remove_leftovers

TEXT = ["a small house", "ein kleines Haus", "the red car drives", "das rote Auto faehrt"] * 20


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.train(TEXT, vocab_size=280)


def make_model(tokenizer, seed=0, **overrides):
    torch.manual_seed(seed)
    v = tokenizer.vocab_size
    options = dict(d_model=16, d_ff=32, n_heads=2) | overrides
    config = ModelConfig.small(src_vocab_size=v, tgt_vocab_size=v, **options)
    return Transformer(config)


def test_round_trip_keeps_weights_config_tokenizer_and_ties(tmp_path, tokenizer):
    model = make_model(tokenizer)
    save_checkpoint(tmp_path / "ckpt", model, tokenizer)
    assert {p.name for p in (tmp_path / "ckpt").iterdir()} >= {"model.safetensors", "config.json"}
    loaded = load_checkpoint(tmp_path / "ckpt")
    assert loaded.model.config == model.config
    for (name, a), b in zip(model.state_dict().items(), loaded.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert loaded.model.output.weight is loaded.model.src_embed.weight  # ties survive the round trip
    assert loaded.tokenizer.encode_source(TEXT[0]) == tokenizer.encode_source(TEXT[0])
    assert not loaded.model.training


def test_optimizer_and_rng_state_restore_exactly(tmp_path, tokenizer):
    model = make_model(tokenizer)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    src = torch.randint(4, tokenizer.vocab_size, (2, 5))
    model(src, src).sum().backward()
    optimizer.step()
    rng = torch.get_rng_state()
    save_checkpoint(tmp_path / "c", model, tokenizer, optimizer=optimizer, trainer_state={"step": 1})
    loaded = load_checkpoint(tmp_path / "c")
    assert loaded.trainer_state["step"] == 1
    assert torch.equal(loaded.trainer_state["rng.torch"], rng)
    fresh = torch.optim.Adam(loaded.model.parameters(), lr=0.0)
    fresh.load_state_dict(loaded.optimizer_state)
    expected, restored = optimizer.state_dict(), fresh.state_dict()
    assert expected["state"].keys() == restored["state"].keys()
    for index, values in expected["state"].items():
        for key, value in values.items():
            assert torch.equal(value, restored["state"][index][key]), (index, key)
    assert tuple(restored["param_groups"][0]["betas"]) == (0.9, 0.98)


def test_nothing_is_pickled(tmp_path, tokenizer):
    model = make_model(tokenizer)
    optimizer = torch.optim.Adam(model.parameters())
    save_checkpoint(tmp_path / "c", model, tokenizer, optimizer=optimizer, trainer_state={"step": 0})
    for path in (tmp_path / "c").iterdir():
        assert path.suffix in {".safetensors", ".json", ".spm"}, path.name
    json.loads((tmp_path / "c" / "trainer_state.json").read_text())


def test_a_crash_while_saving_leaves_the_previous_checkpoint(tmp_path, tokenizer, monkeypatch):
    model = make_model(tokenizer)
    save_checkpoint(tmp_path / "c", model, tokenizer)
    before = (tmp_path / "c" / "model.safetensors").read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(Tokenizer, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path / "c", make_model(tokenizer, seed=1), tokenizer)
    assert (tmp_path / "c" / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]  # no temporary directory left behind
    load_checkpoint(tmp_path / "c")


def test_only_a_checkpoint_is_replaced(tmp_path, tokenizer, monkeypatch):
    """A user's directory or file at the path is refused in one line and left alone, also by `average`, which
    refuses before reading any checkpoint; a MarianMT directory (config.json without "model") is not a checkpoint."""
    model = make_model(tokenizer)
    first = save_checkpoint(tmp_path / "c", model, tokenizer)
    save_checkpoint(first, make_model(tokenizer, seed=1), tokenizer)  # an earlier checkpoint is replaced
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    (tmp_path / "file.txt").write_text("keep")
    (tmp_path / "marian").mkdir()
    (tmp_path / "marian" / "config.json").write_text('{"d_model": 512}')
    (tmp_path / "marian" / "model.safetensors").write_bytes(b"")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    monkeypatch.setattr("tnmt.checkpoint.load_checkpoint", lambda *a, **k: pytest.fail("read a checkpoint"))
    for out, there in (("mine", "a directory with 1 entry"), ("file.txt", "a file"), ("marian", "a directory with 2")):
        message = f"{tmp_path / out}: exists and is not a tnmt checkpoint ({there}"
        with pytest.raises(UserError, match=re.escape(message)):
            save_checkpoint(tmp_path / out, model, tokenizer)
        with pytest.raises(UserError, match=re.escape(message)):
            average_checkpoints([first], tmp_path / out)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_the_model_description_is_read_as_written(tmp_path):
    config, decode = ModelConfig.small(src_vocab_size=40, tgt_vocab_size=50), DecodeConfig(beam_size=2)
    write_model_json(tmp_path / "model.json", config, decode, [("en", "de")])
    assert read_model_json(tmp_path / "model.json") == (config, decode, (("en", "de"),))
    assert json.loads((tmp_path / "model.json").read_text())["languages"] == {"source": "en", "target": "de"}
    several = (("en", "de"), ("de", "fr"), ("fr", "en"))
    write_model_json(tmp_path / "model.json", config, decode, several)
    assert read_model_json(tmp_path / "model.json") == (config, decode, several)
    assert json.loads((tmp_path / "model.json").read_text())["directions"] == ["en-de", "de-fr", "fr-en"]
    write_model_json(tmp_path / "model.json", config, decode)
    assert read_model_json(tmp_path / "model.json") == (config, decode, ())
    (tmp_path / "model.json").write_text(json.dumps({"model": asdict(config), "directions": ["en-en"]}))
    with pytest.raises(UserError, match=r"model\.json: directions: 'en-en' is not a direction"):
        read_model_json(tmp_path / "model.json")
    (tmp_path / "model.json").write_text('{"decode": {}}')
    with pytest.raises(UserError, match=r'model\.json: not a tnmt checkpoint config \(no "model" object\)'):
        read_model_json(tmp_path / "model.json")


def test_decode_settings_written_when_quantize_was_one_of_them_still_load(tmp_path):
    """Checkpoints and exports written before quantize became a load-time option store it with the decoding."""
    config, decode = ModelConfig.small(src_vocab_size=40, tgt_vocab_size=50), DecodeConfig(beam_size=2)
    write_model_json(tmp_path / "model.json", config, decode)
    described = json.loads((tmp_path / "model.json").read_text())
    described["decode"]["quantize"] = "none"
    (tmp_path / "model.json").write_text(json.dumps(described))
    assert read_model_json(tmp_path / "model.json") == (config, decode, ())


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ({"alignment_layer": 2, "alignment_head": 0}, (-2, 1)),  # format 1's defaults with guided alignment
        ({"alignment_layer": 1, "alignment_head": -1}, (-1, 0)),  # the last layer, the heads' mean
        ({}, (-2, 0)),  # today's defaults
    ],
)
def test_format_1_alignment_settings_are_renumbered(tmp_path, written, read):
    """Format 1 counted the aligning layer from the top (1 = the last) and heads from 0 (-1 = the mean); format 2
    numbers both from 1 as everywhere else, with a negative layer counting from the top, so nothing moves."""
    config = ModelConfig.small(src_vocab_size=40, tgt_vocab_size=50)
    write_model_json(tmp_path / "model.json", config, DecodeConfig())
    described = json.loads((tmp_path / "model.json").read_text())
    assert described["format"] == 2
    for key in ("alignment_layer", "alignment_head"):
        del described["decode"][key]
    described["format"] = 1
    described["decode"].update(written)
    (tmp_path / "model.json").write_text(json.dumps(described))
    decode = read_model_json(tmp_path / "model.json")[1]
    assert (decode.alignment_layer, decode.alignment_head) == read


def test_links_are_replaced_atomically(tmp_path, tokenizer):
    model = make_model(tokenizer)
    a = save_checkpoint(tmp_path / "checkpoints" / "a", model, tokenizer)
    b = save_checkpoint(tmp_path / "checkpoints" / "b", model, tokenizer)
    update_link(tmp_path / "last", a)
    update_link(tmp_path / "last", b)
    assert (tmp_path / "last").resolve() == b.resolve()
    assert load_checkpoint(tmp_path / "last").path == tmp_path / "last"


def test_average_is_the_mean_of_the_weights(tmp_path, tokenizer):
    paths = []
    for seed in range(3):
        paths.append(save_checkpoint(tmp_path / str(seed), make_model(tokenizer, seed=seed), tokenizer))
    out = average_checkpoints(paths, tmp_path / "avg")
    models = [load_checkpoint(p).model.state_dict() for p in paths]
    averaged = load_checkpoint(out).model.state_dict()
    for name, value in averaged.items():
        expected = sum(m[name] for m in models) / 3
        torch.testing.assert_close(value, expected)


def test_errors_name_the_file(tmp_path, tokenizer):
    with pytest.raises(UserError, match="no such checkpoint directory"):
        load_checkpoint(tmp_path / "missing")
    save_checkpoint(tmp_path / "c", make_model(tokenizer), tokenizer)
    (tmp_path / "c" / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(UserError, match=r"model\.safetensors: not a valid safetensors file"):
        load_checkpoint(tmp_path / "c")
    (tmp_path / "c" / "config.json").unlink()
    with pytest.raises(UserError, match=r"config\.json: no such file"):
        load_checkpoint(tmp_path / "c")


def test_averaging_different_models_is_refused(tmp_path, tokenizer):
    a = save_checkpoint(tmp_path / "a", make_model(tokenizer), tokenizer)
    b = save_checkpoint(tmp_path / "b", make_model(tokenizer, d_ff=64), tokenizer)
    with pytest.raises(UserError, match="config.json differs"):
        average_checkpoints([a, b], tmp_path / "avg")


def test_decoding_settings_and_languages_travel_with_the_checkpoint(tmp_path, tokenizer):
    from tnmt.config import DecodeConfig

    decode = DecodeConfig(beam_size=2, length_penalty=1.0, max_len=9)
    save_checkpoint(tmp_path / "c", make_model(tokenizer), tokenizer, decode=decode, directions=[("en", "de")])
    loaded = load_checkpoint(tmp_path / "c")
    assert (loaded.decode, loaded.directions) == (decode, (("en", "de"),))
    averaged = load_checkpoint(average_checkpoints([tmp_path / "c"], tmp_path / "avg"))
    assert (averaged.decode, averaged.directions) == (decode, (("en", "de"),))
    save_checkpoint(tmp_path / "plain", make_model(tokenizer), tokenizer)
    assert (load_checkpoint(tmp_path / "plain").decode, load_checkpoint(tmp_path / "plain").directions) == (
        DecodeConfig(),
        (),
    )
    config = json.loads((tmp_path / "c" / "config.json").read_text())
    (tmp_path / "c" / "config.json").write_text(json.dumps({**config, "languages": {"source": "en"}}))
    with pytest.raises(UserError, match=r"config\.json: languages must be"):
        load_checkpoint(tmp_path / "c")
    (tmp_path / "c" / "config.json").write_text(json.dumps({**config, "decode": {"beam_size": 0}}))
    with pytest.raises(UserError, match=r"config\.json decode: DecodeConfig\.beam_size = 0"):
        load_checkpoint(tmp_path / "c")


def test_leftovers_of_killed_writers_are_removed_and_checkpoints_kept(tmp_path, tokenizer):
    model = make_model(tokenizer)
    directory = tmp_path / "checkpoints"
    keep = save_checkpoint(directory / "step_0000002", model, tokenizer)
    gone = save_checkpoint(directory / "step_0000001", model, tokenizer)
    remove_checkpoint(gone)
    (directory / ".step_0000003.tmp-0a1b2c3d").mkdir()  # a checkpoint being built when the writer was killed
    (directory / ".step_0000000.old-0a1b2c3d").mkdir()  # a deletion cut short
    (directory / ".config.json.tmp-0a1b2c3d").write_text("{")  # an atomic write cut short
    (directory / ".last.tmp-0a1b2c3d").symlink_to("step_0000002")  # a link swap cut short
    remove_leftovers(directory)
    assert [p.name for p in directory.iterdir()] == [keep.name]
    load_checkpoint(keep)
