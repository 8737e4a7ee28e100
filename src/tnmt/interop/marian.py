"""Import Hugging Face MarianMT checkpoints (the OPUS-MT models) as tnmt checkpoints.

MarianMT is the paper's Transformer plus a few choices, each of which is a ModelConfig field:
sinusoidal positions in the [sin | cos] layout starting at position 0, embeddings scaled by
sqrt(d_model), post-norm without final LayerNorms, swish (SiLU) in OPUS-MT, a bias on the output
logits, one embedding matrix for encoder, decoder and output projection, and decoding that starts
from the pad token, which is never generated (`decode.step.TokenRules`). `marian_config.py` maps
config.json onto ModelConfig; `ENCODER_LAYER` / `DECODER_LAYER` below map the tensors. A value tnmt
cannot represent exactly is a UserError naming it, never an approximation.

Tokenisation maps sentencepiece pieces to ids through vocab.json, as MarianTokenizer does; it does
not treat target-language codes of multilingual models (">>fra<<") as single tokens, and separate
target vocabularies (target_vocab.json) are refused.

The checkpoint names its language pair, which `tnmt serve` needs (`marian_languages`): each side is the
one given by the user (--source / --target), else the one the model names: tokenizer_config.json's
source_lang / target_lang (MarianTokenizer saves them; OPUS-MT repositories set them), else an
"opus-mt-SRC-TGT" name in config.json's _name_or_path. A flag that disagrees with the model wins, with a
warning: the flags are the way to correct a model that names a group ("ROMANCE") or a wrong code.
"""

import logging
import os
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from tnmt.blocks.positional import sinusoidal_table
from tnmt.checkpoint import check_checkpoint_path, save_checkpoint
from tnmt.config import LANGUAGE_CODE, ModelConfig, is_language_code
from tnmt.data.tokenizer import Tokenizer
from tnmt.errors import UserError
from tnmt.interop.marian_config import marian_model_config
from tnmt.io import read_json
from tnmt.model import Transformer

# tnmt module in every layer  <- Hugging Face module(s); Q, K and V rows are stacked into one in_proj.
ENCODER_LAYER = (
    ("self_attn.in_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
    ("self_attn.out_proj", ("self_attn.out_proj",)),
    ("attn_block.norm", ("self_attn_layer_norm",)),
    ("ffn.linear1", ("fc1",)),
    ("ffn.linear2", ("fc2",)),
    ("ffn_block.norm", ("final_layer_norm",)),
)
DECODER_LAYER = (
    ("self_attn.in_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
    ("self_attn.out_proj", ("self_attn.out_proj",)),
    ("self_block.norm", ("self_attn_layer_norm",)),
    ("cross_attn.in_proj", ("encoder_attn.q_proj", "encoder_attn.k_proj", "encoder_attn.v_proj")),
    ("cross_attn.out_proj", ("encoder_attn.out_proj",)),
    ("cross_block.norm", ("encoder_attn_layer_norm",)),
    ("ffn.linear1", ("fc1",)),
    ("ffn.linear2", ("fc2",)),
    ("ffn_block.norm", ("final_layer_norm",)),
)
# Embedding matrices: the first name found. Tied copies may be stored under any of them, or once.
SHARED_EMBEDDING = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
SOURCE_EMBEDDING = ("model.encoder.embed_tokens.weight", "model.shared.weight")
TARGET_EMBEDDING = ("model.decoder.embed_tokens.weight", "model.shared.weight")
OUTPUT_PROJECTION = ("lm_head.weight",)
POSITIONS = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")
# The last part of a Hugging Face model name: opus-mt-en-de, opus-mt-tc-big-en-fr (Tatoeba's). Only two- or
# three-letter codes: "opus-mt-en-ROMANCE" names a group of languages, "...-de-finetuned" is no pair.
OPUS_MT_NAME = re.compile(r"opus-mt-(?:tc-[a-z]+-)?([a-z]{2,3})-([a-z]{2,3})")
SIDES = ("source", "target")

logger = logging.getLogger(__name__)


def import_marian(
    hf_dir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    source: str | None = None,
    target: str | None = None,
) -> Path:
    """Convert a MarianMT directory (config.json, weights, source.spm, target.spm, vocab.json) to a checkpoint
    that names its language pair (`source`, `target`, or the model's own: see `marian_languages`).

    Raises:
        UserError: A file is missing or malformed, a config value has no exact tnmt equivalent, a language is
            named nowhere, or `out` holds something other than a tnmt checkpoint (both refused before the
            weights are read).
    """
    check_checkpoint_path(out)
    languages = marian_languages(hf_dir, source=source, target=target)
    model, tokenizer = load_marian(hf_dir)
    return save_checkpoint(out, model, tokenizer, directions=[languages])


def marian_languages(
    hf_dir: str | os.PathLike[str], *, source: str | None = None, target: str | None = None
) -> tuple[str, str]:
    """The (source, target) codes of a MarianMT directory: `source` / `target` where given, else the model's.

    Raises:
        UserError: A given code is not a language code, or a side is neither given nor named by the model
            (the message names the flags that say it).
    """
    hf_dir = _marian_dir(hf_dir)
    named = _named_languages(hf_dir)
    chosen: dict[str, str] = {}
    for side, given in zip(SIDES, (source, target), strict=True):
        if given is None:
            if side in named:
                chosen[side] = named[side][0]
            continue
        if not is_language_code(given):
            raise UserError(f"{side} language {given!r}: must be {LANGUAGE_CODE}")
        if side in named and named[side][0] != given:
            code, where = named[side]
            logger.warning(f"{side} language {given!r} replaces the model's {code!r} ({where})")
        chosen[side] = given
    if missing := [side for side in SIDES if side not in chosen]:
        flags = " ".join(f"--{side} CODE" for side in missing)
        raise UserError(
            f"{hf_dir}: the model names no {' or '.join(missing)} language (tokenizer_config.json's "
            f"source_lang/target_lang, or an opus-mt-SRC-TGT name in config.json's _name_or_path); pass {flags}"
        )
    return chosen["source"], chosen["target"]


def opus_mt_languages(name: str) -> tuple[str, str] | None:
    """The (source, target) codes of a Hugging Face model name such as "Helsinki-NLP/opus-mt-en-de", else None."""
    found = OPUS_MT_NAME.fullmatch(name.rstrip("/").rsplit("/", 1)[-1])
    return (found[1], found[2]) if found else None


def _named_languages(hf_dir: Path) -> dict[str, tuple[str, str]]:
    """{side: (code, where the model says it)} for each side the model names; a null or blank value names none."""
    named: dict[str, tuple[str, str]] = {}
    config_path = hf_dir / "config.json"
    if config_path.is_file():  # else load_marian says it is missing
        config = read_json(config_path)
        name = config.get("_name_or_path") if isinstance(config, dict) else None
        if isinstance(name, str) and (pair := opus_mt_languages(name)):
            for side, code in zip(SIDES, pair, strict=True):
                named[side] = (code, f"config.json _name_or_path {name!r}")
    settings = _tokenizer_settings(hf_dir)
    for side in SIDES:  # the tokenizer's own setting is more direct than a name
        key = f"{side}_lang"
        if is_language_code(code := settings.get(key)):
            named[side] = (code, f"tokenizer_config.json {key}")
    return named


def load_marian(hf_dir: str | os.PathLike[str]) -> tuple[Transformer, Tokenizer]:
    """The tnmt model (in eval mode) and tokenizer of a MarianMT directory; see `import_marian`."""
    hf_dir = _marian_dir(hf_dir)
    config = marian_model_config(read_json(hf_dir / "config.json"), where=hf_dir / "config.json")
    model = Transformer(config)
    model.load_state_dict(_convert_weights(_read_weights(hf_dir), model, where=hf_dir))
    return model.eval(), _tokenizer(hf_dir, config)


def _convert_weights(hf: dict[str, Tensor], model: Transformer, *, where: Path) -> dict[str, Tensor]:
    """Hugging Face tensors -> tnmt state_dict; every tensor is either used, a tied copy, or an error."""
    c = model.config
    used: set[str] = set()

    def take(*names: str) -> Tensor:
        for name in names:
            if name in hf:
                used.add(name)
                return hf[name].float()
        raise UserError(f"{where}: the weights lack {names[0]}")

    state: dict[str, Tensor] = {}
    if c.share_embeddings:
        state["src_embed.weight"] = state["tgt_embed.weight"] = take(*SHARED_EMBEDDING)
    else:
        state["src_embed.weight"] = take(*SOURCE_EMBEDDING)
        state["tgt_embed.weight"] = take(*TARGET_EMBEDDING)
    state["output.weight"] = state["tgt_embed.weight"] if c.tie_output else take(*OUTPUT_PROJECTION)
    state["logits_bias"] = take("final_logits_bias").view(-1)  # (1, V) -> (V,)
    for prefix, hf_prefix, n, table in (
        ("encoder_layers", "model.encoder.layers", c.n_encoder_layers, ENCODER_LAYER),
        ("decoder_layers", "model.decoder.layers", c.n_decoder_layers, DECODER_LAYER),
    ):
        for i in range(n):
            for module, hf_modules in table:
                for kind in ("weight", "bias"):
                    parts = [take(f"{hf_prefix}.{i}.{m}.{kind}") for m in hf_modules]
                    state[f"{prefix}.{i}.{module}.{kind}"] = torch.cat(parts)  # (3D, D) for in_proj
    _check_positions(hf, c, where=where)
    tied_copies = {*SHARED_EMBEDDING, *OUTPUT_PROJECTION, *POSITIONS}
    unexpected = sorted(set(hf) - used - tied_copies)
    if unexpected:
        raise UserError(f"{where}: unexpected tensors {unexpected[:5]} (a layer MarianMT does not have)")
    return state


def _check_positions(hf: dict[str, Tensor], config: ModelConfig, *, where: Path) -> None:
    """Older checkpoints store the sinusoid table; it must be the one tnmt computes."""
    expected = sinusoidal_table(config.max_len, config.d_model, layout="concat")
    for name in POSITIONS:
        if name in hf and not torch.allclose(hf[name].float(), expected, atol=1e-4):
            raise UserError(f"{where}: {name} is not MarianMT's [sin | cos] table; cannot import it exactly")


def _read_weights(hf_dir: Path) -> dict[str, Tensor]:
    """model.safetensors, else pytorch_model.bin read as plain tensors (never unpickling code)."""
    safetensors, pickled = hf_dir / "model.safetensors", hf_dir / "pytorch_model.bin"
    if safetensors.exists():
        try:
            return load_file(safetensors)
        except (SafetensorError, OSError) as err:
            raise UserError(f"{safetensors}: not a valid safetensors file ({err})") from None
    if pickled.exists():
        try:
            weights = torch.load(pickled, map_location="cpu", weights_only=True)
        except Exception as err:  # weights_only refuses anything but tensors; torch raises several types
            raise UserError(f"{pickled}: cannot be read as plain tensors ({type(err).__name__})") from None
        if not isinstance(weights, dict) or not all(isinstance(t, Tensor) for t in weights.values()):
            raise UserError(f"{pickled}: expected a state dict of tensors")
        return weights
    raise UserError(f"{hf_dir}: no model.safetensors or pytorch_model.bin")


def _marian_dir(hf_dir: str | os.PathLike[str]) -> Path:
    hf_dir = Path(hf_dir)
    if not hf_dir.is_dir():
        raise UserError(f"{hf_dir}: no such directory")
    return hf_dir


def _tokenizer_settings(hf_dir: Path) -> dict[str, Any]:
    """tokenizer_config.json, which MarianTokenizer writes and older conversions lack ({} then)."""
    path = hf_dir / "tokenizer_config.json"
    settings = read_json(path) if path.exists() else {}
    if not isinstance(settings, dict):
        raise UserError(f"{path}: expected a JSON object")
    return settings


def _tokenizer(hf_dir: Path, config: ModelConfig) -> Tokenizer:
    """MarianTokenizer's files as a tnmt Tokenizer: two sentencepiece models, ids from vocab.json."""
    settings = _tokenizer_settings(hf_dir)
    if settings.get("separate_vocabs") or (hf_dir / "target_vocab.json").exists():
        raise UserError(f"{hf_dir}: separate source/target vocabularies (separate_vocabs) are not supported")
    vocab_path = hf_dir / "vocab.json"
    mapping = read_json(vocab_path)
    if not isinstance(mapping, dict) or sorted(mapping.values()) != list(range(len(mapping))):
        raise UserError(f"{vocab_path}: expected a JSON object mapping pieces to the ids 0..N-1")
    if len(mapping) != config.src_vocab_size:
        raise UserError(
            f"{vocab_path}: {len(mapping)} pieces, but config.json has vocab_size = {config.src_vocab_size}"
        )
    vocab = sorted(mapping, key=mapping.__getitem__)
    for name, key, default in (("pad", "pad_token_id", "<pad>"), ("eos", "eos_token_id", "</s>")):
        piece = _token_text(settings.get(f"{name}_token", default))
        if mapping.get(piece) != getattr(config, f"{name}_id"):
            raise UserError(f"{hf_dir}: config.json {key} is not the id of {piece!r} in vocab.json")
    unk = _token_text(settings.get("unk_token", "<unk>"))
    if unk not in mapping:
        raise UserError(f"{vocab_path}: the unknown token {unk!r} is missing")
    ids = dict(pad_id=config.pad_id, bos_id=config.bos_id, eos_id=config.eos_id, unk_id=mapping[unk])
    return Tokenizer.from_files(hf_dir / "source.spm", hf_dir / "target.spm", vocab=vocab, **ids)


def _token_text(token: Any) -> str:
    return token["content"] if isinstance(token, dict) else str(token)  # AddedToken objects are saved as dicts
