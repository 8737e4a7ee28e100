import pytest

from tnmt import ModelConfig


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


def test_from_dict_rejects_unknown_keys_and_lists_valid_ones():
    with pytest.raises(ValueError, match=r"unknown ModelConfig field\(s\) \['d_modle'\].*d_model"):
        ModelConfig.from_dict({"src_vocab_size": 10, "tgt_vocab_size": 10, "d_modle": 8})


def test_dict_round_trip():
    config = ModelConfig.small(src_vocab_size=50, tgt_vocab_size=50, activation="gelu")
    assert ModelConfig.from_dict(config.to_dict()) == config
