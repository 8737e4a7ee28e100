from dataclasses import asdict

import pytest

from tnmt import ModelConfig
from tnmt.config import PRESETS, DataConfig, DecodeConfig, TrainConfig, parse
from tnmt.errors import UserError


def test_presets_follow_table_3():
    base = ModelConfig.base(src_vocab_size=100, tgt_vocab_size=100)
    assert (base.d_model, base.n_heads, base.d_ff, base.n_encoder_layers, base.dropout) == (
        512,
        8,
        2048,
        6,
        0.1,
    )
    assert base.share_embeddings and base.tie_output
    big = ModelConfig.big(src_vocab_size=100, tgt_vocab_size=100)
    assert (big.d_model, big.n_heads, big.d_ff, big.dropout) == (1024, 16, 4096, 0.3)
    assert ModelConfig.small(src_vocab_size=100, tgt_vocab_size=120).share_embeddings is False


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"d_model": 30, "n_heads": 4}, "d_model"),
        ({"activation": "tanh"}, "activation"),
        ({"dropout": -0.1}, "dropout"),
        ({"positional": "rotary"}, "positional"),
        ({"positional_layout": "stacked"}, "positional_layout"),
        ({"n_heads": 0}, "n_heads"),
        ({"eos_id": 100}, "eos_id"),
        ({"tgt_vocab_size": 99, "share_embeddings": True}, "share_embeddings"),
    ],
)
def test_bad_values_name_the_field(overrides, field):
    with pytest.raises(ValueError, match=rf"ModelConfig\.{field} = "):
        ModelConfig(**{"src_vocab_size": 100, "tgt_vocab_size": 100, **overrides})


def test_parse_rejects_unknown_keys_and_lists_valid_ones():
    with pytest.raises(UserError, match=r"config.json: unknown key 'd_modle'; valid keys: \[.*'d_model'"):
        parse(ModelConfig, {"src_vocab_size": 10, "tgt_vocab_size": 10, "d_modle": 8}, where="config.json")


def test_dict_round_trip():
    config = ModelConfig.small(src_vocab_size=50, tgt_vocab_size=50, activation="gelu")
    assert parse(ModelConfig, asdict(config), where="x") == config


@pytest.mark.parametrize(
    ("cls", "values", "message"),
    [
        (TrainConfig, {"max_steps": "3"}, r"^w max_steps = '3': expected int$"),
        (TrainConfig, {"max_steps": True}, r"^w max_steps = True: expected int$"),
        (TrainConfig, {"activation_checkpointing": 1}, r"^w activation_checkpointing = 1: expected bool$"),
        (TrainConfig, {"best_metric": "ter"}, r"^w best_metric = 'ter': expected one of 'bleu', 'chrf'$"),
        (TrainConfig, {"compile": True}, r"^w compile = True: expected one of 'off', 'auto', 'on'$"),
        (TrainConfig, {"compile": "cuda"}, r"^w compile = 'cuda': expected one of 'off', 'auto', 'on'$"),
        (TrainConfig, {"warmup_steps": 0}, r"^w: TrainConfig.warmup_steps = 0: must be positive$"),
        (DecodeConfig, {"length_penalty": float("nan")}, r"DecodeConfig.length_penalty = nan: must be a finite"),
        (TrainConfig, {"rdrop_alpha": -1.0}, r"^w: TrainConfig.rdrop_alpha = -1.0: must be >= 0$"),
        (TrainConfig, {"distill_at_step": -1}, r"^w: TrainConfig.distill_at_step = -1: must be >= 0$"),
        (DataConfig, {"subword_samples": -2}, r"^w: DataConfig.subword_samples = -2: must be >= 0$"),
        (DataConfig, {"subword_nbest": 1}, r"^w: DataConfig.subword_nbest = 1: must be >= 2$"),
        (DataConfig, {"subword_alpha": 0.0}, r"^w: DataConfig.subword_alpha = 0.0: must be positive$"),
        (
            DataConfig,
            {"subword_samples": 4, "tokenizer_model": "bpe"},
            r"^w: DataConfig.tokenizer_model = 'bpe': must be unigram for subword samples$",
        ),
    ],
)
def test_parse_is_strict_about_types_and_names_the_key(cls, values, message):
    with pytest.raises(UserError, match=message):
        parse(cls, values, where="w")


def test_parse_takes_ints_for_floats_and_lists_for_tuples():
    config = parse(TrainConfig, {"lr_factor": 2, "adam_betas": [0.9, 0.99]}, where="w")
    assert config.lr_factor == 2.0 and isinstance(config.lr_factor, float) and config.adam_betas == (0.9, 0.99)


def test_a_bare_model_config_is_the_papers_base_model():
    config = ModelConfig(src_vocab_size=100, tgt_vocab_size=120)
    assert (config.d_model, config.n_heads, config.d_ff, config.n_encoder_layers, config.n_decoder_layers) == (
        512,
        8,
        2048,
        6,
        6,
    )
    assert config.tie_output and not config.norm_first and config.positional == "sinusoidal"
    shape = {name: value for name, value in asdict(config).items() if name in asdict(PRESETS["base"])}
    assert asdict(PRESETS["base"]) == {**shape, "share_embeddings": True}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"beam_size": 0}, "beam_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"max_len": -1}, "max_len"),
        ({"max_len_a": -1.0}, "max_len_a"),
    ],
)
def test_decode_config_rejects_bad_values(changes, field):
    with pytest.raises(ValueError, match=rf"DecodeConfig\.{field} = "):
        DecodeConfig(**changes)


def test_guided_alignment_is_a_weight_and_goes_with_distillation():
    assert TrainConfig().guided_alignment == 0.0  # off
    assert TrainConfig(guided_alignment=0.05).guided_alignment == 0.05
    with pytest.raises(ValueError, match=r"TrainConfig\.guided_alignment = -0\.1: must be >= 0"):
        TrainConfig(guided_alignment=-0.1)
    TrainConfig(guided_alignment=0.05, distill_at_step=5)  # the translations train without links
