"""The recorded search: a scripted decoder pins every step of a hand-computed case; on a trained tiny model the
trace's translation is `translate`'s (its JSON and text: tests/test_views_trace.py)."""

import math

import pytest
import torch
from test_beam import DEFAULT, EOS, SCRIPT, A, B, C, ScriptedModel

from tnmt.config import DecodeConfig
from tnmt.decode import beam_search_nbest, greedy_hypotheses
from tnmt.decode.trace import SearchRecorder


class AttendingScriptedModel(ScriptedModel):
    """The scripted decoder, with a cross-attention row per search row: 1 layer, 1 head, 1 source position,
    holding the number of tokens the row was fed (so a row can be told from another)."""

    def step(self, tokens, cache, *, need_weights=False):
        logits, _ = super().step(tokens, cache)
        fed = torch.tensor([float(len(row[1])) for row in cache.rows])  # (N,) after this step's token
        cross = fed[:, None, None, None]  # (N, H, 1, S)
        return logits, [(None, cross)] if need_weights else None  # L x (self weights, cross weights)


def traced(beam_size: int, *, top_k: int = 3, max_len: int = 10):
    model = AttendingScriptedModel({3: SCRIPT}, DEFAULT)
    settings = DecodeConfig(beam_size=beam_size, length_penalty=0.0, max_len=max_len, block_loops=False)
    recorder = SearchRecorder(top_k=top_k, length_penalty=0.0, eos_id=EOS)
    src = torch.tensor([[3, EOS]])
    if beam_size == 1:
        found = [greedy_hypotheses(model, src, settings, recorder=recorder)[0]]
    else:
        found = beam_search_nbest(model, src, settings, n_best=2, recorder=recorder)[0]
    return found, recorder.steps


def fates(step) -> list[tuple[int, int, str, str, int | None]]:
    return [(c.parent, c.token, c.fate, c.reason, c.child) for c in step.candidates]


def test_beam_search_steps_are_recorded_as_the_search_took_them():
    """SCRIPT with 2 beams (tests/test_beam.py): b+EOS finishes at step 1, a+EOS ranks third and is pruned;
    at step 2 a,a+EOS finishes and the best open beam (a,a,a: 0.0525 < 0.07) cannot win, so the search ends."""
    found, steps = traced(2)
    assert [h.tokens for h in found] == [[B], [A, A]]
    assert len(steps) == 3

    assert [(h.tokens, h.log_prob) for h in steps[0].hypotheses] == [([], 0.0)]  # only the first beam lives
    top = steps[0].hypotheses[0].top
    assert [t.token for t in top] == [A, B, C] and [t.prob for t in top] == pytest.approx([0.5, 0.4, 0.1])
    assert fates(steps[0]) == [(0, A, "kept", "", 0), (0, B, "kept", "", 1), (0, C, "pruned", "beam full", None)]
    assert steps[0].finished == []

    assert [h.tokens for h in steps[1].hypotheses] == [[A], [B]]
    assert fates(steps[1]) == [
        (1, EOS, "finished", "eos", None),  # b, EOS: 0.36
        (0, A, "kept", "", 0),  # a, a: 0.175
        (0, EOS, "pruned", "beam full", None),  # a, EOS: 0.15, third: outside the beam
        (0, B, "kept", "", 1),  # a, b: 0.1
    ]
    probs = [c.prob for c in steps[1].candidates]
    assert probs == pytest.approx([0.9, 0.35, 0.3, 0.2])  # given the parent
    log_probs = [c.log_prob for c in steps[1].candidates]
    assert log_probs == pytest.approx([math.log(p) for p in (0.36, 0.175, 0.15, 0.1)])
    assert [(h.tokens, h.log_prob) for h in steps[1].finished] == [([B], pytest.approx(math.log(0.36)))]

    assert [h.tokens for h in steps[2].hypotheses] == [[A, A], [A, B]]
    assert fates(steps[2]) == [
        (0, EOS, "finished", "eos", None),  # a, a, EOS: 0.07
        (0, A, "pruned", "search done", None),  # a, a, a: 0.0525 cannot beat 0.07
        (1, EOS, "pruned", "beam full", None),  # a, b, EOS: 0.05
        (0, B, "pruned", "search done", None),
    ]
    assert [h.tokens for h in steps[2].finished] == [[B], [A, A]]


def test_the_cross_attention_rows_follow_the_open_hypotheses():
    _, steps = traced(2)
    # (L, N, H, S): one row per open hypothesis, each fed one token more at every step
    assert [tuple(step.cross_attention.shape) for step in steps] == [(1, 1, 1, 1), (1, 2, 1, 1), (1, 2, 1, 1)]
    assert [step.cross_attention.flatten().tolist() for step in steps] == [[1.0], [2.0, 2.0], [3.0, 3.0]]


def test_greedy_search_steps_keep_the_best_and_prune_the_rest():
    found, steps = traced(1)
    assert [h.tokens for h in found] == [[A, A]]
    assert [fates(step) for step in steps] == [
        [(0, A, "kept", "", 0), (0, B, "pruned", "beam full", None), (0, C, "pruned", "beam full", None)],
        [(0, A, "kept", "", 0), (0, EOS, "pruned", "beam full", None), (0, B, "pruned", "beam full", None)],
        [(0, EOS, "finished", "eos", None), (0, A, "pruned", "beam full", None), (0, B, "pruned", "beam full", None)],
    ]
    assert [h.tokens for h in steps[2].hypotheses] == [[A, A]]
    [finished] = steps[2].finished
    assert finished.tokens == [A, A] and finished.log_prob == pytest.approx(math.log(0.5 * 0.35 * 0.4))
    assert finished.log_prob == pytest.approx(found[0].log_prob)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_the_length_limit_finishes_the_open_hypotheses(beam_size):
    found, steps = traced(beam_size, max_len=1)
    assert len(steps) == 1
    kept = [c for c in steps[0].candidates if c.fate != "pruned"]
    assert [(c.token, c.fate, c.reason) for c in kept] == [
        (A, "finished", "length limit"),
        (B, "finished", "length limit"),
    ][:beam_size]
    assert [h.tokens for h in steps[0].finished] == [[A], [B]][:beam_size]
    assert found[0].tokens == [A]


def test_a_recorder_follows_one_sentence():
    model = AttendingScriptedModel({3: SCRIPT, 4: SCRIPT}, DEFAULT)
    recorder = SearchRecorder(top_k=2, length_penalty=0.0, eos_id=EOS)
    with pytest.raises(ValueError, match="one sentence"):
        beam_search_nbest(model, torch.tensor([[3, EOS], [4, EOS]]), DecodeConfig(beam_size=2), recorder=recorder)
    with pytest.raises(ValueError, match="top_k"):
        SearchRecorder(top_k=0, length_penalty=0.0, eos_id=EOS)


SENTENCES = [
    "one",
    "two hundred and five",
    "seven thousand, three hundred and forty-two",
    "nine thousand nine hundred and ninety-nine",
    "eighty",
    "one thousand and one",
    "forty-four",
    "six hundred",
]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_trace_translates_as_translate_does(tiny_translator, beam_size):
    settings = DecodeConfig(beam_size=beam_size, segment=False)  # a trace records one sentence as given
    expected = tiny_translator.translate(SENTENCES, settings)
    for sentence, translation in zip(SENTENCES, expected, strict=True):
        trace = tiny_translator.trace(sentence, settings, top_k=4)
        assert trace.translation == translation
        assert trace.source_pieces[-1] == "</s>" and len(trace.source_pieces) == trace.encoder_attention.shape[-1]
        best = max(trace.steps[-1].finished, key=lambda h: h.score)
        assert tiny_translator.tokenizer.decode_target(best.tokens) == translation
        for step in trace.steps:
            assert all(len(h.top) == 4 for h in step.hypotheses)
            assert step.cross_attention.shape[:2] == (
                tiny_translator.model.config.n_decoder_layers,
                len(step.hypotheses),
            )
            assert torch.allclose(step.cross_attention.sum(-1), torch.ones(()))  # each row a distribution


def test_tracing_leaves_translation_unchanged_and_rejects_an_empty_text(tiny_translator):
    before = tiny_translator.translate(SENTENCES)
    tiny_translator.trace(SENTENCES[2], DecodeConfig(beam_size=2))
    assert tiny_translator.translate(SENTENCES) == before
    with pytest.raises(ValueError, match="empty"):
        tiny_translator.trace("  ")
