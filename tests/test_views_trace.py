"""The trace's views: the JSON gives every record's fields in order with each id's piece beside it (pinned on the
scripted search of tests/test_trace.py), and on a tiny model the JSON and the text show every step."""

import math

import pytest
import torch
from test_beam import EOS, A, B
from test_trace import traced

from tnmt.config import DecodeConfig
from tnmt.decode.trace import OpenHypothesis, Trace, TraceStep
from tnmt.views.trace import explanation, format_trace


class Letters:
    """The scripted vocabulary's pieces: PAD, BOS, EOS, then the letters a, b, c."""

    names = ["<pad>", "<s>", "</s>", "a", "b", "c"]

    def target_pieces(self, ids: list[int]) -> list[str]:
        return [self.names[i] for i in ids]

    def decode_target(self, ids: list[int]) -> str:
        return "".join(self.target_pieces(ids))


def test_the_json_of_a_scripted_beam_search():
    """SCRIPT with 2 beams: at step 1 the open hypotheses are a and b, and b+EOS finishes (p 0.36)."""
    _, steps = traced(2)
    trace = Trace("b", ["c", "</s>"], torch.full((1, 1, 2, 2), 0.5), steps)
    settings = DecodeConfig(beam_size=2, length_penalty=0.0)
    answer = explanation(trace, Letters(), settings, 3)
    trace_keys = ["translation", "source_pieces", "encoder_attention", "steps", "swapped_in"]
    assert list(answer) == [*trace_keys, "beam_size", "top_k", "length_penalty"]
    assert (answer["beam_size"], answer["top_k"], answer["length_penalty"]) == (2, 3, 0.0)
    assert answer["encoder_attention"] == [[[[0.5, 0.5], [0.5, 0.5]]]]
    step = answer["steps"][1]
    assert list(step) == ["step", "hypotheses", "candidates", "finished", "cross_attention"] and step["step"] == 1
    first = step["hypotheses"][0]
    assert list(first) == ["pieces", "tokens", "log_prob", "score", "top", "constraints"]
    assert (first["pieces"], first["tokens"], first["constraints"]) == (["a"], [A], [])
    assert first["log_prob"] == pytest.approx(math.log(0.5)) and first["score"] == first["log_prob"]  # alpha 0
    assert [(t["piece"], t["token"]) for t in first["top"]] == [("a", A), ("</s>", EOS), ("b", B)]
    assert [t["prob"] for t in first["top"]] == pytest.approx([0.35, 0.3, 0.2])
    assert list(first["top"][0]) == ["piece", "token", "prob"]
    candidate = step["candidates"][0]
    assert list(candidate) == ["piece", "parent", "token", "prob", "log_prob", "score", "fate", "reason", "child"]
    assert (candidate["piece"], candidate["parent"], candidate["token"]) == ("</s>", 1, EOS)
    assert (candidate["fate"], candidate["reason"], candidate["child"]) == ("finished", "eos", None)
    [finished] = step["finished"]
    assert list(finished) == ["pieces", "text", "log_prob", "score"]
    assert (finished["pieces"], finished["text"]) == (["b"], "b")
    assert finished["log_prob"] == pytest.approx(math.log(0.36))
    assert step["cross_attention"] == [[[[2.0], [2.0]]]]  # (L, H, N, S): each row fed a, b


def test_constraints_are_a_list_per_hypothesis_and_no_attention_an_empty_one():
    hypothesis = OpenHypothesis([B], -1.0, -1.0, [], constraints=(True, False))
    trace = Trace("b", ["</s>"], torch.zeros(0), [TraceStep([hypothesis])])
    [step] = explanation(trace, Letters(), DecodeConfig(), 1)["steps"]
    assert step["hypotheses"][0]["constraints"] == [True, False] and step["cross_attention"] == []


def test_text_and_json_views(tiny_translator):
    settings = DecodeConfig(beam_size=2)
    trace = tiny_translator.trace("two hundred and five", settings, top_k=3)
    answer = explanation(trace, tiny_translator.tokenizer, settings, 3)
    assert answer["translation"] == trace.translation and (answer["beam_size"], answer["top_k"]) == (2, 3)
    first = answer["steps"][0]
    assert first["hypotheses"][0]["pieces"] == [] and len(first["hypotheses"][0]["top"]) == 3
    layers, heads = tiny_translator.model.config.n_decoder_layers, tiny_translator.model.config.n_heads
    assert (len(first["cross_attention"]), len(first["cross_attention"][0])) == (layers, heads)
    text = format_trace(trace, tiny_translator.tokenizer)
    assert text.startswith("source: ") and text.endswith(f"translation: {trace.translation}")
    assert text.count("\nstep ") == len(trace.steps)
