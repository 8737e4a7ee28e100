"""Experiment recipes: one strict TOML file with [data], [model], [train] and [decode] tables.

Tables map 1:1 onto the dataclasses of config.py (`DataConfig`, `Architecture`, `TrainConfig`,
`DecodeConfig`), and `--section.key=value` overrides (values parsed as TOML) are applied on top.
`extends = "other.toml"` (relative to the recipe's own file) starts from another recipe's tables and
changes only the keys this file sets, so a family of recipes (one corpus, four translation directions)
keeps its shared settings in one file. Anything
unknown or ill-typed is a one-line error that names the file, table and key, because a silently ignored
typo wastes a training run. This module is the only place overrides are parsed.
"""

import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tnmt.config import PRESETS, Architecture, DataConfig, DecodeConfig, ModelConfig, TrainConfig, parse
from tnmt.errors import UserError, reading_file

if TYPE_CHECKING:  # not at run time: reading a recipe needs no sentencepiece
    from tnmt.data.tokenizer import Tokenizer

FROM_TOKENIZER = ("src_vocab_size", "tgt_vocab_size", "pad_id", "bos_id", "eos_id", "language_ids")


@dataclass(frozen=True)
class Recipe:
    """A whole experiment. [model] starts from `PRESETS[preset]` (default "small") and sets fields of
    `Architecture`; vocabulary sizes and special ids come from the tokenizer (`model_config`)."""

    data: DataConfig
    model: Architecture
    train: TrainConfig
    decode: DecodeConfig

    def __post_init__(self) -> None:
        if self.model.share_embeddings and not self.data.joint_vocabulary:
            raise ValueError(
                "[model] share_embeddings = true needs [data] joint_vocabulary = true: "
                "separate vocabularies number their pieces independently"
            )
        if self.data.multilingual and self.train.distill_at_step:
            raise ValueError("[train] distill_at_step is for one language pair: [data] languages lists several")
        if self.train.diversify:
            self._check_diversify()
        if self.train.guided_alignment and not self.model.n_decoder_layers:
            raise ValueError("[train] guided_alignment needs a decoder layer: [model] n_decoder_layers = 0 has none")

    def _check_diversify(self) -> None:
        """Diversification needs a run that trains both ways and then narrows to one direction."""
        if not self.data.first_direction_from:
            raise ValueError(
                "[train] diversify needs a bidirectional run: [data] first_direction_from > 0, with directions "
                "such as ['en-de', 'de-en']"
            )
        source, target = self.data.trained_directions[0]
        if (target, source) not in self.data.trained_directions:
            raise ValueError(
                f"[train] diversify translates {target}->{source} too: [data] directions must list {target}-{source}"
            )

    def model_config(self, tokenizer: "Tokenizer") -> ModelConfig:
        """The model's config for `tokenizer`'s vocabularies and special ids."""
        sizes = dict(src_vocab_size=tokenizer.source_vocab_size, tgt_vocab_size=tokenizer.vocab_size)
        return ModelConfig(**asdict(self.model), **sizes, **tokenizer.special_ids, language_ids=tokenizer.language_ids)

    def longest_side(self, model_max_len: int) -> int:
        """Subword tokens a kept training side may have: the recipe's limit, and room for BOS/EOS in a model
        of `model_max_len` positions (a checkpoint's, when training starts from one)."""
        return min(self.data.max_tokens_per_sentence, model_max_len - 1)

    def to_dict(self) -> dict[str, Any]:
        """Plain values, [model] fully resolved (no preset), as written to a run's recipe.json."""
        return {name: asdict(getattr(self, name)) for name in SECTIONS}


SECTIONS = {"data": DataConfig, "model": Architecture, "train": TrainConfig, "decode": DecodeConfig}


def load_recipe(path: str | None, overrides: Sequence[str] = ()) -> Recipe:
    """Read a TOML recipe (None: all defaults) and apply `--section.key=value` overrides (values parsed as TOML).

    Raises:
        UserError: unreadable TOML, a malformed override, an unknown section or key (listing the valid
            ones), a wrong type or an invalid value.
    """
    data = {} if path is None else _read(Path(path), chain=())
    for item in overrides:
        _apply_override(data, item)
    where = path or "command line"
    if unknown := sorted(set(data) - set(SECTIONS)):
        raise UserError(f"{where}: unknown section(s) {unknown}; valid: {sorted(SECTIONS)}")
    for name, table in data.items():
        if not isinstance(table, dict):
            raise UserError(f"{where}: {name} must be a table ([{name}]), not a value")
    if "bf16" in data.get("train", {}):  # the key before train.precision: say what replaced it
        raise UserError(f'{where} [train]: bf16 was replaced by precision = "bf16" (or "fp32", "fp16")')
    model = dict(data.get("model", {}))
    preset = model.pop("preset", "small")
    if not isinstance(preset, str) or preset not in PRESETS:
        raise UserError(f"{where} [model]: preset must be one of {sorted(PRESETS)}, got {preset!r}")
    if reserved := [key for key in model if key in FROM_TOKENIZER]:
        raise UserError(f"{where} [model]: {reserved[0]} comes from the tokenizer and cannot be set")
    sections = {name: data.get(name, {}) for name in SECTIONS}
    sections["model"] = {**asdict(PRESETS[preset]), **model}
    parsed = {name: parse(cls, sections[name], where=f"{where} [{name}]") for name, cls in SECTIONS.items()}
    try:
        return Recipe(**parsed)
    except ValueError as err:
        raise UserError(f"{where}: {err}") from None


def _read(path: Path, *, chain: tuple[Path, ...]) -> dict[str, Any]:
    """The tables of the recipe file at `path`, merged key by key over those of the recipe it `extends`."""
    try:
        with reading_file(path, what="recipe file", directory="not a recipe file"), open(path, "rb") as f:
            data = tomllib.load(f)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: invalid TOML ({e})") from None
    if "extends" not in data:
        return data
    base = data.pop("extends")
    if not isinstance(base, str) or not base:
        raise UserError(f"{path}: extends must be the path of another recipe file, got {base!r}")
    chain = (*chain, path.resolve())
    if (path.parent / base).resolve() in chain:
        raise UserError(f"{path}: extends {base!r}, which extends it back (a cycle)")
    merged = _read(path.parent / base, chain=chain)
    for name, table in data.items():
        if isinstance(table, dict) and isinstance(merged.get(name), dict):
            merged[name] = {**merged[name], **table}
        else:
            merged[name] = table
    return merged


def _apply_override(data: dict[str, Any], item: str) -> None:
    key, sep, raw = item.removeprefix("--").partition("=")
    section, dot, name = key.partition(".")
    if not item.startswith("--") or not sep or not dot or not name:
        raise UserError(f"override {item!r}: expected --section.key=value, e.g. --train.max_steps=100")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # a bare word such as a path: take it as a string
    table = data.setdefault(section, {})
    if not isinstance(table, dict):
        raise UserError(f"override {item!r}: {section} is a value in the recipe, not a table")
    table[name] = value
