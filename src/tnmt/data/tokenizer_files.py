"""A tokenizer's directory on disk: `source.spm` and `target.spm` (sentencepiece models), `vocab.json` (an explicit
vocabulary, when the ids are not the models' own: an imported Marian model's) and `tokenizer.json` (the format
version, the special ids, the languages of a multilingual model). Plain formats, each written atomically; reading
names the file and field that is wrong. The `Tokenizer` (data/tokenizer.py) saves and loads through these two.
"""

import json
from pathlib import Path
from typing import NamedTuple

import sentencepiece as spm

from tnmt.data.subword_model import load_model
from tnmt.errors import UserError
from tnmt.io import atomic_write_bytes, atomic_write_text, read_json

FORMAT_VERSION = 1
SOURCE_FILE, TARGET_FILE, VOCAB_FILE, CONFIG_FILE = "source.spm", "target.spm", "vocab.json", "tokenizer.json"


class SpecialIds(NamedTuple):
    """The ids of padding, the start and end of a sentence, and an unknown piece."""

    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int


class TokenizerFiles(NamedTuple):
    """What a tokenizer's directory holds (`target` is `source` when the two sides share one model)."""

    source: spm.SentencePieceProcessor
    target: spm.SentencePieceProcessor
    vocab: list[str] | None
    ids: SpecialIds
    languages: list[str]


def write_files(
    directory: Path,
    source: spm.SentencePieceProcessor,
    target: spm.SentencePieceProcessor,
    vocab: list[str] | None,
    ids: SpecialIds,
    languages: tuple[str, ...],
) -> None:
    """Write a tokenizer's directory; without `vocab`, a `vocab.json` left from before is removed."""
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(directory / SOURCE_FILE, source.serialized_model_proto())
    atomic_write_bytes(directory / TARGET_FILE, target.serialized_model_proto())
    if vocab is not None:
        atomic_write_text(directory / VOCAB_FILE, json.dumps(vocab, ensure_ascii=False))
    else:
        (directory / VOCAB_FILE).unlink(missing_ok=True)
    config = {"format_version": FORMAT_VERSION, **ids._asdict(), "has_vocab": vocab is not None}
    if languages:
        config["languages"] = list(languages)
    atomic_write_text(directory / CONFIG_FILE, json.dumps(config, indent=2) + "\n")


def read_files(directory: Path) -> TokenizerFiles:
    """Read what `write_files` wrote.

    Raises:
        UserError: a file is missing or malformed, or a field of `tokenizer.json` is; the message names it.
    """
    config_path = directory / CONFIG_FILE
    config = read_json(config_path)
    if not isinstance(config, dict) or config.get("format_version") != FORMAT_VERSION:
        found = config.get("format_version") if isinstance(config, dict) else None
        raise UserError(f"{config_path}: format_version is {found!r}, this tnmt reads {FORMAT_VERSION}")
    for key in SpecialIds._fields:
        if not isinstance(config.get(key), int):
            raise UserError(f"{config_path}: {key!r} must be an integer, found {config.get(key)!r}")
    vocab = None
    if config.get("has_vocab"):
        vocab = read_json(directory / VOCAB_FILE)
        if not isinstance(vocab, list) or not all(isinstance(piece, str) for piece in vocab):
            raise UserError(f"{directory / VOCAB_FILE}: expected a JSON list of pieces")
    languages = config.get("languages", [])
    if not isinstance(languages, list) or not all(isinstance(language, str) for language in languages):
        raise UserError(f"{config_path}: 'languages' must be a list of language codes, found {languages!r}")
    source = load_model(directory / SOURCE_FILE)
    target = load_model(directory / TARGET_FILE)
    if target.serialized_model_proto() == source.serialized_model_proto():
        target = source
    ids = SpecialIds(*(config[key] for key in SpecialIds._fields))
    return TokenizerFiles(source, target, vocab, ids, languages)
