"""Experiment recipes: one strict TOML file with [data], [model], [train] and [decode] tables.

Tables map 1:1 onto the dataclasses of config.py, and `--section.key=value` overrides (values parsed
as TOML) are applied on top. Anything unknown or ill-typed is a one-line error that lists the valid
keys, because a silently ignored typo wastes a training run.
"""

import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from tnmt.config import DataConfig, DecodeConfig, ModelConfig, TrainConfig
from tnmt.errors import UserError


@dataclass(frozen=True)
class Recipe:
    """A whole experiment: one TOML file with [data], [model], [train] and [decode] tables.

    [model] holds ModelConfig fields except the vocabulary sizes and special ids, which come from the
    tokenizer; `preset` picks base / big / small as the starting point.
    """

    data: DataConfig
    model: dict[str, Any]
    train: TrainConfig
    decode: DecodeConfig

    def model_config(self, *, vocab_size: int, pad_id: int, bos_id: int, eos_id: int) -> ModelConfig:
        options = dict(self.model)
        preset = getattr(ModelConfig, options.pop("preset", "small"))
        ids = dict(pad_id=pad_id, bos_id=bos_id, eos_id=eos_id)
        return preset(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, **ids, **options)


RECIPE_SECTIONS = {"data": DataConfig, "train": TrainConfig, "decode": DecodeConfig}
MODEL_TUNABLE = {f.name: f for f in fields(ModelConfig)} | {"preset": None}
MODEL_FROM_TOKENIZER = ("src_vocab_size", "tgt_vocab_size", "pad_id", "bos_id", "eos_id")


def load_recipe(path: str | None, overrides: Sequence[str] = ()) -> Recipe:
    """Read a TOML recipe and apply `section.key=value` overrides (values parsed as TOML).

    Raises:
        UserError: unknown section or key (listing the valid ones), wrong type, unreadable TOML.
    """
    data: dict[str, Any] = {}
    if path is not None:
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            raise UserError(f"{path}: no such recipe file") from None
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"{path}: invalid TOML ({e})") from None
    for item in overrides:
        _apply_override(data, item.removeprefix("--"))
    where = path or "command line"
    unknown = sorted(set(data) - {*RECIPE_SECTIONS, "model"})
    if unknown:
        raise UserError(f"{where}: unknown section(s) {unknown}; valid: {sorted([*RECIPE_SECTIONS, 'model'])}")
    sections = {name: _build(cls, data.get(name, {}), f"{where} [{name}]") for name, cls in RECIPE_SECTIONS.items()}
    model = data.get("model", {})
    for key, value in model.items():
        if key in MODEL_FROM_TOKENIZER:
            raise UserError(f"{where} [model]: {key} comes from the tokenizer and cannot be set")
        if key not in MODEL_TUNABLE:
            raise UserError(f"{where} [model]: unknown key {key!r}; valid keys: {sorted(MODEL_TUNABLE)}")
        expected = str if key == "preset" else MODEL_TUNABLE[key].type
        _check_type(value, expected, f"{where} [model] {key}")
    if model.get("preset", "small") not in ("base", "big", "small"):
        raise UserError(f"{where} [model]: preset must be 'base', 'big' or 'small', got {model['preset']!r}")
    recipe = Recipe(model=model, **sections)
    try:  # validate the model options now, with placeholder vocabulary values
        recipe.model_config(vocab_size=recipe.data.vocab_size, pad_id=0, bos_id=1, eos_id=2)
    except (TypeError, ValueError) as e:
        raise UserError(f"{where} [model]: {e}") from None
    return recipe


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    return {
        "data": asdict(recipe.data),
        "model": dict(recipe.model),
        "train": asdict(recipe.train),
        "decode": asdict(recipe.decode),
    }


def _apply_override(data: dict[str, Any], item: str) -> None:
    key, sep, raw = item.partition("=")
    section, dot, name = key.partition(".")
    if not sep or not dot or not name:
        raise UserError(f"override {item!r}: expected --section.key=value, e.g. --train.max_steps=100")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # a bare word such as a path: take it as a string
    data.setdefault(section, {})[name] = value


def _build(cls: type, values: dict[str, Any], where: str) -> Any:
    valid = {f.name: f for f in fields(cls)}
    for key, value in values.items():
        if key not in valid:
            raise UserError(f"{where}: unknown key {key!r}; valid keys: {sorted(valid)}")
        _check_type(value, valid[key].type, f"{where} {key}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        return cls(**values)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None


def _check_type(value: Any, expected: Any, where: str) -> None:
    origin = getattr(expected, "__origin__", None)
    if expected is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif origin is tuple:
        ok = isinstance(value, list | tuple) and all(isinstance(v, int | float) for v in value)
    else:
        ok = isinstance(value, expected)
    if not ok:
        raise UserError(f"{where} = {value!r}: expected {getattr(expected, '__name__', expected)}")
