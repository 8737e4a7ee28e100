import torch

from tnmt import ModelConfig
from tnmt.config import DecodeConfig
from tnmt.decode.rules import TokenRules, fit_source, output_limits


def test_output_limits_is_the_smallest_of_relative_absolute_and_model_caps():
    src = torch.tensor([4, 2])  # source lengths, EOS counted

    def limits(model_max_len: int, **decode) -> list[int]:
        return output_limits(src, model_max_len=model_max_len, decode=DecodeConfig(**decode)).tolist()

    assert limits(100, max_len_a=1.0, max_len_b=50) == [54, 52]
    assert limits(100, max_len=53) == [53, 52]
    assert limits(100, max_len_a=1.5, max_len_b=1) == [7, 4]
    # The output plus its EOS must fit the model's positions.
    assert limits(20, max_len=500) == [19, 19]
    assert limits(20, max_len_a=0.0, max_len_b=0) == [1, 1]
    assert limits(100, max_len=0) == [54, 52]  # 0 = no absolute cap
    # Caps past int64 are the model's cap: max_len_b overflowed the cast, max_len_a wrapped to one token.
    assert limits(20, max_len_b=10**30) == limits(20, max_len_a=1e30) == limits(20, max_len=10**30) == [19, 19]


def test_fit_source_cuts_to_the_models_positions_with_a_one_line_warning(caplog):
    assert fit_source([5, 6, 7], model_max_len=4, line=1) == [5, 6, 7]
    assert not caplog.records
    assert fit_source([5, 6, 7, 8, 9], model_max_len=4, line=7) == [5, 6, 7]
    [record] = caplog.records
    assert record.name == "tnmt" and record.getMessage().startswith("line 7: 5 source tokens exceed")
    assert "\n" not in record.getMessage()


def test_token_rules_ban_pad_and_bos_always_and_eos_before_min_len():
    config = ModelConfig(src_vocab_size=6, tgt_vocab_size=6, d_model=4, n_heads=1, d_ff=4, max_len=8, tie_output=False)
    rules = TokenRules.of(config, min_len=2, device=torch.device("cpu"))
    scores = rules.apply_(torch.zeros(2, 6), generated=1)
    assert torch.isinf(scores[:, [0, 1, 2]]).all() and (scores[:, 3:] == 0).all()
    assert torch.isinf(rules.apply_(torch.zeros(2, 6), generated=2)[:, 2]).logical_not().all()


def test_token_rules_keep_eos_when_it_doubles_as_bos_or_pad():
    config = ModelConfig(
        src_vocab_size=6, tgt_vocab_size=6, d_model=4, n_heads=1, d_ff=4, pad_id=2, bos_id=2, eos_id=0, tie_output=False
    )  # MarianMT-style: decoding starts from pad
    rules = TokenRules.of(config, min_len=0, device=torch.device("cpu"))
    assert rules.banned.tolist() == [2]
