"""MarianMT's config.json as a ModelConfig: one table row per key, HF's default when it is absent.

Every config.json key that shapes the computation is either mapped onto a ModelConfig field or
checked to hold the only value tnmt can compute exactly; anything else is a UserError naming the key.
`MARIAN_ARCHITECTURE` holds what every MarianMT model is whatever its config.json says. Keys that
only steer Hugging Face's generate (num_beams, max_length, forced_eos_token_id ...) are not read:
tnmt's search has its own options (`bad_words_ids` is checked: tnmt bans exactly the pad token).
"""

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tnmt.config import ModelConfig
from tnmt.errors import UserError

Convert = Callable[[Any, dict[str, Any]], Any]  # (value, whole config.json) -> ModelConfig value


@dataclass(frozen=True)
class Field:
    """A config.json key, Hugging Face's default for it, and the ModelConfig field it sets ("" = checked only)."""

    key: str
    default: Any
    field: str
    convert: Convert  # raises ValueError("must be ...") for a value tnmt cannot represent


def _int(value: Any, _: dict[str, Any]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be an integer")
    return value


def _float(value: Any, _: dict[str, Any]) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    return float(value)


def _bool(value: Any, _: dict[str, Any]) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _equal(required: Any) -> Convert:
    def check(value: Any, _: dict[str, Any]) -> None:
        if value != required:
            raise ValueError(f"must be {json.dumps(required)}: tnmt has no other setting")

    return check


def _same_as(other: str) -> Convert:
    def check(value: Any, config: dict[str, Any]) -> None:
        if value != _value(config, other):
            raise ValueError(f"must equal {other} ({_value(config, other)}): tnmt uses one value for both")

    return check


def _activation(value: Any, _: dict[str, Any]) -> str:
    names = {"swish": "swish", "silu": "swish", "gelu": "gelu", "relu": "relu"}  # HF's ACT2FN -> tnmt
    if value not in names:
        raise ValueError(f"must be one of {sorted(names)} (the activations tnmt computes identically)")
    return names[value]


def _target_vocab(value: Any, config: dict[str, Any]) -> int:
    vocab_size = _value(config, "vocab_size")
    if value not in (None, vocab_size):
        raise ValueError(f"must equal vocab_size ({vocab_size}): tnmt's tokenizer has one vocab.json")
    return _int(vocab_size, config)


def _single_id(value: Any, config: dict[str, Any]) -> int:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return _int(value, config)


def _only_pad_banned(value: Any, config: dict[str, Any]) -> None:
    if value not in (None, [], [[_value(config, "pad_token_id")]]):
        raise ValueError("may only ban the pad token: tnmt's search bans pad and nothing else")


# config.json key                 HF default  ModelConfig field      conversion
CONFIG_FIELDS: tuple[Field, ...] = (
    Field("model_type", None, "", _equal("marian")),
    Field("vocab_size", 58101, "src_vocab_size", _int),
    Field("decoder_vocab_size", None, "tgt_vocab_size", _target_vocab),
    Field("d_model", 1024, "d_model", _int),
    Field("encoder_attention_heads", 16, "n_heads", _int),
    Field("decoder_attention_heads", 16, "", _same_as("encoder_attention_heads")),
    Field("encoder_layers", 12, "n_encoder_layers", _int),
    Field("decoder_layers", 12, "n_decoder_layers", _int),
    Field("encoder_ffn_dim", 4096, "d_ff", _int),
    Field("decoder_ffn_dim", 4096, "", _same_as("encoder_ffn_dim")),
    Field("activation_function", "gelu", "activation", _activation),
    Field("dropout", 0.1, "dropout", _float),
    Field("attention_dropout", 0.0, "attention_dropout", _float),
    Field("activation_dropout", 0.0, "activation_dropout", _float),
    Field("encoder_layerdrop", 0.0, "", _equal(0.0)),
    Field("decoder_layerdrop", 0.0, "", _equal(0.0)),
    Field("max_position_embeddings", 1024, "max_len", _int),
    Field("scale_embedding", False, "scale_embeddings", _bool),
    Field("share_encoder_decoder_embeddings", True, "share_embeddings", _bool),
    Field("tie_word_embeddings", True, "tie_output", _bool),
    Field("pad_token_id", 58100, "pad_id", _int),
    Field("decoder_start_token_id", 58100, "bos_id", _int),
    Field("eos_token_id", 0, "eos_id", _single_id),
    Field("bad_words_ids", None, "", _only_pad_banned),
    # Keys of older (BART-derived) configs; other values describe architectures MarianMT does not have.
    Field("normalize_before", False, "", _equal(False)),  # True = pre-norm
    Field("add_final_layer_norm", False, "", _equal(False)),
    Field("normalize_embedding", False, "", _equal(False)),  # True = LayerNorm on the embeddings
    Field("static_position_embeddings", True, "", _equal(True)),  # False = learned positions
    Field("add_bias_logits", False, "", _equal(False)),
)

# What every MarianMT model is, whatever config.json says (transformers' modeling_marian.py).
MARIAN_ARCHITECTURE = dict(
    positional="sinusoidal",
    positional_layout="concat",  # MarianSinusoidalPositionalEmbedding: [sin | cos], positions from 0
    norm_first=False,  # LayerNorm after each residual sum, no final LayerNorm
    final_logits_bias=True,  # MarianMTModel.final_logits_bias
    layer_norm_eps=1e-5,  # nn.LayerNorm's default, which MarianMT uses
)


def marian_model_config(marian: dict[str, Any], *, where: str | os.PathLike[str] = "config.json") -> ModelConfig:
    """The ModelConfig of a MarianMT config.json, following `CONFIG_FIELDS` and `MARIAN_ARCHITECTURE`."""
    values: dict[str, Any] = dict(MARIAN_ARCHITECTURE)
    for f in CONFIG_FIELDS:
        value = _value(marian, f.key)
        try:
            converted = f.convert(value, marian)
        except ValueError as err:
            raise UserError(f"{where}: {f.key} = {json.dumps(value)} is not supported: {err}") from None
        if f.field:
            values[f.field] = converted
    # transformers 5 ties no embedding at all without tie_word_embeddings, even when they are "shared"
    values["share_embeddings"] &= values["tie_output"]
    try:
        return ModelConfig(**values)
    except ValueError as err:
        keys = {f.field: f.key for f in CONFIG_FIELDS if f.field}
        message = str(err)
        for field, key in keys.items():  # name the config.json key, not the tnmt field
            message = message.replace(f"ModelConfig.{field} ", f"{key} (ModelConfig.{field}) ")
        raise UserError(f"{where}: {message}") from None


def _value(config: dict[str, Any], key: str) -> Any:
    return config.get(key, next(f.default for f in CONFIG_FIELDS if f.key == key))
