"""The JSON views' helpers: a dataclass is `asdict`'s dict in field order with JSON's lists, equal to its JSON
read back; numbers round as a person reads them, a tensor's float32 values included."""

import json
from dataclasses import dataclass

import torch

from tnmt.views.json_values import as_json, rounded


@dataclass(frozen=True)
class Unit:
    index: int
    pairs: list[tuple[int, float]]


@dataclass(frozen=True)
class Layer:
    name: str
    units: list[Unit]
    met: tuple[bool, ...] = ()


def test_as_json_is_asdict_with_lists_in_field_order():
    layer = Layer("feed-forward", [Unit(3, [(7, 0.5), (1, 0.25)])], met=(True, False))
    answer = as_json(layer)
    assert answer == {
        "name": "feed-forward",
        "units": [{"index": 3, "pairs": [[7, 0.5], [1, 0.25]]}],
        "met": [True, False],
    }
    assert list(answer) == ["name", "units", "met"] and list(answer["units"][0]) == ["index", "pairs"]
    assert json.loads(json.dumps(answer)) == answer  # no tuple left: the dict is its own JSON
    assert layer.units[0].pairs[0] == (7, 0.5)  # the record itself is left as it was


def test_rounded_floats_and_tensors():
    assert rounded(0.123456) == 0.1235 and rounded(2.0 / 3.0, 3) == 0.667
    assert rounded(torch.tensor([[0.018, 1 / 3]])) == [[0.018, 0.3333]]  # float32 0.018, printed as 0.018
    assert json.dumps(rounded(torch.tensor([0.018]), 3)) == "[0.018]"
    assert rounded(torch.zeros(2, 0, 3)) == [[], []]
