"""benchmarks/speed/where_time_goes.py on the tiny model: every phase is charged its own time once (the phases and
"other" add up to the timed run), each wrapped function is found where the package looks it up and put back after,
the outputs do not change under the timers, and the decoder steps' operators are counted per step."""

from dataclasses import replace

import torch

import tnmt.translate.prepared as prepared
import tnmt.translate.steering as steering
from benchmarks.speed.where_time_goes import OTHER, Timers, step_operators, wrapped
from tnmt.model import BoundDecoder
from tnmt.translate.door import ModelDoor

TEXTS = ["two hundred and five. seven thousand!", "three", "five hundred and two thousand three hundred"]


def test_the_phases_add_up_to_the_run_and_the_outputs_do_not_change(tiny_translator):
    settings = replace(tiny_translator.decode, beam_size=2, max_len=12)
    plain = [t.text for t in tiny_translator.translations(TEXTS, settings, evidence=True)]
    timers = Timers()
    with wrapped(tiny_translator, timers):
        timed = [t.text for t in tiny_translator.translations(TEXTS, settings, evidence=True)]
        inside = dict(timers.seconds)
    assert timed == plain
    for phase in ("text in: segmentation", "text in: tokenisation", "search: encoder", "search: decoder steps",
                  "search: output projection", "search: log-softmax", "search: bookkeeping",
                  "text out: detokenisation", "text out: joining", "evidence"):  # fmt: skip
        assert inside.get(phase, 0.0) > 0.0, phase
    assert OTHER not in inside and all(seconds > 0 for seconds in inside.values())


def test_every_wrapped_function_is_put_back(tiny_translator):
    def looked_up():
        return ModelDoor.search, BoundDecoder.features, steering.plan, prepared.plan_of, torch.Tensor.log_softmax

    before = looked_up()
    project, encode = tiny_translator.door.decoder.project, tiny_translator.tokenizer.encode_source_pieces
    with wrapped(tiny_translator, Timers()):
        assert prepared.plan_of is not before[3] and ModelDoor.search is not before[0]
    assert (
        ModelDoor.search,
        BoundDecoder.features,
        steering.plan,
        prepared.plan_of,
        torch.Tensor.log_softmax,
    ) == before
    assert tiny_translator.door.decoder.project is project
    assert tiny_translator.tokenizer.encode_source_pieces == encode


def test_a_nested_phase_is_not_charged_to_its_caller_too():
    timers = Timers()
    inner = timers.charged("inner", lambda: sum(range(10**5)))
    outer = timers.charged("outer", lambda: [inner() for _ in range(3)])
    outer()
    assert timers.seconds["inner"] > 3 * timers.seconds["outer"] > 0


def test_the_decoder_steps_operators_are_counted_per_step(tiny_translator):
    found = step_operators(tiny_translator, 1, TEXTS)
    assert found["steps"] > 1 and found["aten_ops_per_step"] > 10
    assert "matrix products" in found["self_us_per_step_by_kind"]
