"""Checkpoints: a directory of safetensors + JSON, written atomically, never unpickled.

    step_000800/
      model.safetensors     weights (tied matrices stored once)
      config.json           {"format": 2, "model": ModelConfig fields, "decode": DecodeConfig fields,
                             "languages": {"source": "en", "target": "de"} when known, or for a
                             multilingual model "directions": ["en-de", "de-en", ...]}
      source.spm, target.spm, tokenizer.json   the subword tokenizer (see data/tokenizer.py)
      shortlist.safetensors the vocabulary shortlist learned from the training pairs (data/shortlist.py),
                            when the checkpoint has one
      optimizer.safetensors + trainer_state.json   only in training checkpoints: Adam moments,
                            step, data position, RNG state and metrics, so `--resume` continues exactly;
                            with an EMA of the weights (train/ema.py) model.safetensors holds the average
                            and optimizer.safetensors the weights training goes on from ("weights.*")

A checkpoint is built in a hidden sibling directory and renamed into place (`io.atomic_directory`), so a
process killed at any moment leaves either no checkpoint or a complete one, and it replaces only an
earlier checkpoint (`is_checkpoint`), never a user's directory or file. The training loop then points the
`last` and `best` symlinks at it with an atomic rename (`update_link`), and deletes a checkpoint by first
renaming it out of sight (`remove_checkpoint`), so no visible checkpoint is ever half deleted either.
What a killed writer leaves behind is hidden (a leading dot) and `io.remove_leftovers` clears it.
Averaging (section 6.1) lives here too.
The decoding settings the recipe validated with travel in config.json, so translating with the
checkpoint later uses them by default; `write_model_json` / `read_model_json` are the one writer and
reader of that {model, decode, languages or directions} description, which a CTranslate2 export carries too.
Training, decoding, serving and interop all load through here.
"""

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from tnmt.config import DecodeConfig, ModelConfig, is_language_code, parse
from tnmt.data.shortlist import Shortlist
from tnmt.data.tokenizer import Tokenizer
from tnmt.directions import Direction, direction_name, parse_direction
from tnmt.errors import UserError
from tnmt.io import (
    atomic_directory,
    atomic_write_bytes,
    atomic_write_text,
    check_destination,
    hidden_sibling,
    read_json,
)
from tnmt.model import Transformer

FORMAT = 2  # 2: alignment layers and heads numbered from 1 at the input side (format 1 counted them otherwise)
LEGACY_DECODE_KEY = "quantize"  # once a decoding setting, now chosen when a model is loaded (translate/translator.py)
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"
A_CHECKPOINT = "a tnmt checkpoint"  # what `save_checkpoint` replaces, in its refusal of anything else


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (in eval mode), its tokenizer, decoding settings and training state."""

    model: Transformer
    tokenizer: Tokenizer
    path: Path
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    directions: tuple[Direction, ...] = ()  # (source, target) codes, e.g. (("en", "de"),); () when not known
    trainer_state: dict[str, Any] = field(default_factory=dict)
    optimizer_state: dict[str, Any] | None = None
    training_weights: dict[str, torch.Tensor] | None = None  # when the model's weights are an EMA of them
    shortlist: Shortlist | None = None  # the vocabulary shortlist, when the checkpoint has one


def save_checkpoint(
    path: str | os.PathLike[str],
    model: Transformer,
    tokenizer: Tokenizer,
    *,
    decode: DecodeConfig | None = None,
    directions: Sequence[Direction] = (),
    optimizer: torch.optim.Optimizer | None = None,
    trainer_state: dict[str, Any] | None = None,
    training_weights: dict[str, torch.Tensor] | None = None,
    shortlist: Shortlist | None = None,
) -> Path:
    """Write a complete checkpoint directory at `path`, replacing an earlier checkpoint there atomically.

    `decode` (the recipe's [decode] table) becomes the checkpoint's default decoding; None = `DecodeConfig()`.
    `directions` ((source, target) pairs) let a server know which pairs the model translates.
    `training_weights` (a state_dict; with `optimizer` only): the weights training continues from when
    `model` holds an average of them. `shortlist`: the vocabulary shortlist a search may project onto.

    Raises:
        UserError: `path` holds something other than a checkpoint (nothing is written).
    """
    path = Path(path)
    with atomic_directory(path, is_own=is_checkpoint, what=A_CHECKPOINT) as tmp:
        atomic_write_bytes(tmp / WEIGHTS_FILE, save_tensors(_unique_tensors(model.state_dict())))
        write_model_json(tmp / CONFIG_FILE, model.config, decode or DecodeConfig(), directions)
        tokenizer.save(tmp)
        if shortlist is not None:
            shortlist.save(tmp)
        if optimizer is not None:
            tensors, structure = _flatten_optimizer(optimizer.state_dict())
            tensors["rng.torch"] = torch.get_rng_state()
            tensors |= {f"weights.{k}": v for k, v in _unique_tensors(training_weights or {}).items()}
            atomic_write_bytes(tmp / "optimizer.safetensors", save_tensors(tensors))
            state = {"optimizer": structure, **(trainer_state or {})}
            atomic_write_text(tmp / "trainer_state.json", json.dumps(state, indent=2) + "\n")
    return path


def is_checkpoint(path: Path) -> bool:
    """Whether `path` holds what `save_checkpoint` writes: a config.json with a "model" object, and weights.
    A MarianMT directory (config.json without "model") or a user's directory does not."""
    try:
        config = read_json(path / CONFIG_FILE)
    except (UserError, OSError):
        return False
    return isinstance(config, dict) and isinstance(config.get("model"), dict) and (path / WEIGHTS_FILE).is_file()


def check_checkpoint_path(path: str | os.PathLike[str]) -> None:
    """Refuse, before any work, a `path` that `save_checkpoint` would refuse at the end (see `check_destination`)."""
    check_destination(path, is_own=is_checkpoint, what=A_CHECKPOINT)


def write_model_json(
    path: Path, model: ModelConfig, decode: DecodeConfig, directions: Sequence[Direction] = ()
) -> None:
    """Write the {format, model, decode, languages or directions} description of a model (atomically): a
    checkpoint's config.json, and a CTranslate2 export's tnmt_model.json. One direction is written as the
    "languages" it has always been; none is left out (unknown)."""
    described: dict[str, Any] = {"format": FORMAT, "model": asdict(model), "decode": asdict(decode)}
    if len(directions) == 1:
        described["languages"] = {"source": directions[0][0], "target": directions[0][1]}
    elif directions:
        described["directions"] = [direction_name(d) for d in directions]
    atomic_write_text(path, json.dumps(described, indent=2) + "\n")


def read_model_json(path: Path) -> tuple[ModelConfig, DecodeConfig, tuple[Direction, ...]]:
    """The model config, decoding settings and (source, target) directions `write_model_json` wrote.

    Raises:
        UserError: The file is missing or malformed; the message names it and the field.
    """
    described = read_json(path)
    if not isinstance(described, dict) or not isinstance(described.get("model"), dict):
        raise UserError(f'{path}: not a tnmt checkpoint config (no "model" object)')
    model = parse(ModelConfig, described["model"], where=f"{path} model")
    stored = described.get("decode", {})
    if isinstance(stored, dict):  # files written before quantize became a load-time option carry it here
        stored = {key: value for key, value in stored.items() if key != LEGACY_DECODE_KEY}
        if described.get("format", 1) == 1:
            stored = _renumbered(stored)
    decode = parse(DecodeConfig, stored, where=f"{path} decode")
    return model, decode, _directions(described, path)


def _renumbered(decode: dict[str, Any]) -> dict[str, Any]:
    """A format-1 [decode] table in today's numbering: its alignment layer counted from the top (1 = the last),
    which is today's -1, and its head from 0 with -1 for the heads' mean, which is today's head + 1 (0 = the mean)."""
    renumbered = dict(decode)
    layer, head = decode.get("alignment_layer"), decode.get("alignment_head")
    if type(layer) is int and layer >= 1:
        renumbered["alignment_layer"] = -layer
    if type(head) is int and head >= -1:
        renumbered["alignment_head"] = head + 1
    return renumbered


def load_checkpoint(path: str | os.PathLike[str], *, map_location: str = "cpu", training: bool = True) -> Checkpoint:
    """Load a checkpoint directory (or a `last`/`best` link to one); errors name the bad file.

    `training=False` skips the trainer's state (optimizer moments, the weights being trained): translating
    needs none of it, and it is three times the model's size on disk.
    """
    path = Path(path)
    if not path.is_dir():
        what = "a file, not a checkpoint directory" if path.exists() else "no such checkpoint directory"
        raise UserError(f"{path}: {what}")
    config, decode, directions = read_model_json(path / CONFIG_FILE)
    model = Transformer(config)
    weights = _read_tensors(path / WEIGHTS_FILE, map_location)
    _check_weights(model, weights, path / WEIGHTS_FILE)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = {name for name in missing if _is_tied(model, name, weights)}
    if untied := sorted(set(missing) - tied):
        raise UserError(
            f"{path / 'model.safetensors'}: lacks {len(untied)} weights config.json needs ({untied[0]}, ...)"
        )
    if unexpected:
        extra = sorted(unexpected)
        raise UserError(
            f"{path / 'model.safetensors'}: has {len(extra)} weights config.json has no place for ({extra[0]}, ...)"
        )
    model.eval()
    tokenizer = Tokenizer.load(path)
    checkpoint = Checkpoint(model=model, tokenizer=tokenizer, path=path, decode=decode, directions=directions)
    vocabularies = {"source_vocab_size": config.src_vocab_size, "target_vocab_size": config.tgt_vocab_size}
    checkpoint.shortlist = Shortlist.load(path, **vocabularies)
    if training and (path / "trainer_state.json").exists():
        state = read_json(path / "trainer_state.json")
        tensors = _read_tensors(path / "optimizer.safetensors", map_location)
        checkpoint.trainer_state = state
        checkpoint.trainer_state["rng.torch"] = tensors.pop("rng.torch")
        training = {k.removeprefix("weights."): tensors.pop(k) for k in list(tensors) if k.startswith("weights.")}
        _check_weights(model, training, path / "optimizer.safetensors")
        checkpoint.training_weights = training or None
        checkpoint.optimizer_state = _unflatten_optimizer(tensors, state.pop("optimizer"))
    return checkpoint


def update_link(link: Path, target: Path) -> None:
    """Point the symlink `link` at `target` (relative), atomically: readers never see it missing."""
    tmp = hidden_sibling(link, "tmp")
    tmp.symlink_to(os.path.relpath(target, link.parent))
    os.replace(tmp, link)


def remove_checkpoint(path: Path) -> None:
    """Delete a checkpoint directory: renamed to a hidden name first, so a kill mid-way leaves no partial one."""
    old = hidden_sibling(path, "old")
    os.replace(path, old)
    shutil.rmtree(old, ignore_errors=True)


def average_checkpoints(paths: list[Path], out: Path) -> Path:
    """Average the weights of several checkpoints of one model (section 6.1: the last 5 or 20) into `out`.

    Raises:
        UserError: No checkpoint, an unreadable one, different models, or `out` holds something other than
            a checkpoint (refused before any checkpoint is read).
    """
    if not paths:
        raise UserError("average: give at least one checkpoint")
    check_checkpoint_path(out)
    first = load_checkpoint(paths[0])
    total = {k: v.double() for k, v in first.model.state_dict().items()}
    for p in paths[1:]:
        other = load_checkpoint(p)
        if other.model.config != first.model.config:
            raise UserError(f"{p}: config.json differs from {paths[0]}; only one model's checkpoints can be averaged")
        for k, v in other.model.state_dict().items():
            total[k] += v.double()
    first.model.load_state_dict({k: (v / len(paths)).to(torch.float32) for k, v in total.items()})
    return save_checkpoint(
        out, first.model, first.tokenizer, decode=first.decode, directions=first.directions, shortlist=first.shortlist
    )


def _directions(described: dict[str, Any], where: Path) -> tuple[Direction, ...]:
    """The "languages" pair or the "directions" list of a model description (() when it names neither)."""
    if (value := described.get("languages")) is not None:
        ok = isinstance(value, dict) and all(is_language_code(value.get(k)) for k in ("source", "target"))
        if not ok:
            raise UserError(f'{where}: languages must be {{"source": code, "target": code}}, got {value!r}')
        return ((value["source"], value["target"]),)
    listed = described.get("directions", [])
    try:
        if not isinstance(listed, list) or not all(isinstance(text, str) for text in listed):
            raise ValueError(f"{listed!r} is not a list of directions such as 'en-de'")
        return tuple(parse_direction(text) for text in listed)
    except ValueError as err:
        raise UserError(f"{where}: directions: {err}") from None


def _check_weights(model: Transformer, weights: dict[str, torch.Tensor], where: Path) -> None:
    """One line for weights that config.json sizes differently (torch's own error is a page per tensor),
    and for NaN or infinite weights (a diverged run or a damaged file), which would translate to nothing."""
    expected = model.state_dict()
    wrong = sorted(
        name for name, tensor in weights.items() if name in expected and tensor.shape != expected[name].shape
    )
    if wrong:
        name = wrong[0]
        raise UserError(
            f"{where}: {name} has shape {list(weights[name].shape)} but config.json makes it "
            f"{list(expected[name].shape)} ({len(wrong)} of {len(weights)} tensors disagree)"
        )
    if broken := sorted(name for name, tensor in weights.items() if not torch.isfinite(tensor).all()):
        raise UserError(f"{where}: {broken[0]} holds NaN or infinite values ({len(broken)} tensors do)")


def _unique_tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop aliases of tied weights (shared embeddings, tied output): safetensors stores each once."""
    seen: set[int] = set()
    unique = {}
    for name, tensor in state.items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            unique[name] = tensor.contiguous()
    return unique


def _is_tied(model: Transformer, name: str, weights: dict[str, torch.Tensor]) -> bool:
    """Whether parameter `name` shares storage with a parameter that was loaded under another name."""
    params = dict(model.named_parameters(remove_duplicate=False))
    return name in params and any(
        other in weights and params[other] is params[name] for other in params if other != name
    )


def _flatten_optimizer(state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split an optimizer state_dict into tensors (for safetensors) and a JSON-able structure."""
    tensors, scalars = {}, {}
    for index, values in state["state"].items():
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{index}.{key}"] = value.contiguous()
            else:
                scalars[f"{index}.{key}"] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], structure: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for name, tensor in tensors.items():
        _, index, key = name.split(".", 2)
        state.setdefault(int(index), {})[key] = tensor
    for name, value in structure["scalars"].items():
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    return {"state": state, "param_groups": structure["param_groups"]}


def _read_tensors(path: Path, map_location: str) -> dict[str, torch.Tensor]:
    try:
        return {k: v.to(map_location) for k, v in load_tensors(path.read_bytes()).items()}
    except FileNotFoundError:
        raise UserError(f"{path}: missing from the checkpoint") from None
    except (SafetensorError, ValueError) as e:
        raise UserError(f"{path}: not a valid safetensors file ({e})") from None
