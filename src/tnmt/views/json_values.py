"""The JSON views' two helpers: a recorded dataclass as JSON's types, and numbers rounded for reading.

Every JSON a learner reads (`POST /v1/inspect`, `POST /v1/explain`, `tnmt inspect --json`, `tnmt explain
--json`) is built from these two, so a record's keys, their order and how its numbers are rounded are decided
here once; the renderers only add what a record does not hold (a token's piece, the settings).
"""

from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor


def as_json(record: Any) -> dict[str, Any]:
    """A dataclass as a dict of JSON's types: `dataclasses.asdict` (keys in field order, nested dataclasses as
    dicts), tuples as lists, so the dict equals its own JSON read back."""
    return _lists(asdict(record))


def _lists(value: Any) -> Any:
    """`asdict` keeps tuples (a unit and its activation, which constraints are met): JSON has only lists."""
    if isinstance(value, dict):
        return {key: _lists(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lists(v) for v in value]
    return value


def rounded(values: Tensor | float, decimals: int = 4) -> Any:
    """A float rounded to `decimals`, or a tensor as nested lists of such floats: the JSON stays small and a
    heat map loses nothing. A tensor is rounded in float64, which prints 0.018 as 0.018 (a float32 0.018 prints
    as 0.017999999225139618); a float by Python's `round`, to the nearest decimal exactly."""
    if isinstance(values, Tensor):
        return torch.round(values.double(), decimals=decimals).tolist()
    return round(values, decimals)
