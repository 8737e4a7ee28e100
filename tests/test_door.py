"""translate/door.py: the one door to the model. Its teacher-forced pass is the forward pass of the decoder that
translates, its search starts every sentence from its own start token, and a frozen model is bound once."""

import torch

from tnmt.blocks.masks import padding_mask
from tnmt.config import DecodeConfig
from tnmt.model import Transformer
from tnmt.translate.door import ModelDoor
from tnmt.translate.prepared import Source
from tnmt.translate.translator import Translator

SOURCES = [Source([5, 6, 7, 8], None, 1), Source([9, 10], None, 1)]
OUTPUTS = [[11, 12, 13], [14]]


def test_the_teacher_forced_pass_equals_the_models_forward_pass(tiny_checkpoint):
    """Frozen weight copies, a fresh cache and all positions at once: the logits and cross-attention of
    `Transformer.forward` on the same source and decoder input (padding rows aside)."""
    translator = Translator.from_checkpoint(tiny_checkpoint)
    door = translator.door
    forced = door.teacher_forced(SOURCES, OUTPUTS)
    src = door.source_batch(SOURCES)
    assert forced.fed.tolist() == [[1, 11, 12, 13], [1, 14, 0, 0]]
    with torch.no_grad():
        logits, maps = door.model.attention_maps(src, forced.fed)
    torch.testing.assert_close(forced.logits[0], logits[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(forced.logits[1, :2], logits[1, :2], atol=1e-5, rtol=0)
    torch.testing.assert_close(forced.weights[0][1][0], maps.cross[0][0], atol=1e-6, rtol=0)
    assert bool(padding_mask(src, 0)[1, 0, 0, 3:].logical_not().all())  # the second source is padded
    aligning = door.teacher_forced(SOURCES, OUTPUTS, encoded=forced.encoded, layers=1)
    assert aligning.logits is None and aligning.encoded is forced.encoded  # the encoder did not run again


def test_each_sentence_starts_from_its_own_start_token(multi_checkpoint):
    base = Translator.from_checkpoint(multi_checkpoint)
    de, it = (base.tokenizer.language_id(lang) for lang in ("de", "it"))
    sources = [Source([5, 6, 7], None, de), Source([5, 6, 7], None, it)]
    _, found = base.door.search(sources, DecodeConfig(beam_size=1, max_len=4))
    alone = [base.door.search([s], DecodeConfig(beam_size=1, max_len=4))[1][0] for s in sources]
    assert [f[0].tokens for f in found] == [a[0].tokens for a in alone]
    forced = base.door.teacher_forced(sources, [[8], [8]])
    assert forced.fed[:, 0].tolist() == [de, it]


def test_a_frozen_model_is_bound_once_and_a_shared_one_per_search(tiny_checkpoint, monkeypatch):
    frozen = Translator.from_checkpoint(tiny_checkpoint).door
    shared = ModelDoor(frozen.model, eos_id=2)  # its weights may change between searches (training's validation)
    binds = []
    bind = Transformer.incremental_decoder
    monkeypatch.setattr(Transformer, "incremental_decoder", lambda self, **k: binds.append(self) or bind(self, **k))
    for door in (frozen, shared):
        door.search(SOURCES, DecodeConfig(beam_size=2, max_len=4))
        door.teacher_forced(SOURCES, OUTPUTS)
    assert len(binds) == 2  # the shared model's search and pass; the frozen one was bound when loaded


def test_recording_a_pass_reports_every_sub_layer(tiny_checkpoint):
    door = Translator.from_checkpoint(tiny_checkpoint).door
    reports = {}
    door.teacher_forced(SOURCES[:1], OUTPUTS[:1], record=lambda *where, **tensors: reports.setdefault(where, tensors))
    assert {
        ("encoder", "input"),
        ("encoder", 0, "self-attention"),
        ("encoder", 0, "feed-forward"),
        ("encoder", 0, "hidden units"),
        ("decoder", "input"),
        ("decoder", 0, "masked self-attention"),
        ("decoder", 0, "cross-attention"),
        ("decoder", 0, "feed-forward"),
        ("decoder", 0, "hidden units"),
    } == set(reports)
    assert reports[("decoder", 0, "cross-attention")]["out"].shape == (4, 16)  # (T, D) rows of the one sentence
