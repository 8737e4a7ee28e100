import pytest
import torch

from tnmt import ModelConfig, Transformer
from tnmt.decode.step import TokenRules, output_limits


def test_output_limits_is_the_smallest_of_relative_absolute_and_model_caps():
    src = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])  # lengths 4 and 2 (EOS counted, pad not)
    limits = output_limits(src, pad_id=0, model_max_len=100, max_len_a=1.0, max_len_b=50)
    assert limits.tolist() == [54, 52]
    assert output_limits(src, pad_id=0, model_max_len=100, max_len=53).tolist() == [53, 52]
    assert output_limits(src, pad_id=0, model_max_len=100, max_len_a=1.5, max_len_b=1).tolist() == [7, 4]
    # The output plus its EOS must fit the model's positions.
    assert output_limits(src, pad_id=0, model_max_len=20, max_len=500).tolist() == [19, 19]
    assert output_limits(src, pad_id=0, model_max_len=20, max_len_a=0.0, max_len_b=0).tolist() == [1, 1]


def test_output_limits_rejects_a_non_positive_cap():
    with pytest.raises(ValueError, match="max_len"):
        output_limits(torch.tensor([[2]]), pad_id=0, model_max_len=10, max_len=0)


def test_token_rules_ban_pad_and_bos_always_and_eos_before_min_len():
    config = ModelConfig(src_vocab_size=6, tgt_vocab_size=6, d_model=4, n_heads=1, d_ff=4, max_len=8)
    rules = TokenRules.of(Transformer(config), min_len=2, device=torch.device("cpu"))
    scores = rules.apply_(torch.zeros(2, 6), generated=1)
    assert torch.isinf(scores[:, [0, 1, 2]]).all() and (scores[:, 3:] == 0).all()
    assert torch.isinf(rules.apply_(torch.zeros(2, 6), generated=2)[:, 2]).logical_not().all()


def test_token_rules_keep_eos_when_it_doubles_as_bos_or_pad():
    config = ModelConfig(
        src_vocab_size=6, tgt_vocab_size=6, d_model=4, n_heads=1, d_ff=4, pad_id=2, bos_id=2, eos_id=0
    )  # MarianMT-style: decoding starts from pad
    rules = TokenRules.of(Transformer(config), min_len=0, device=torch.device("cpu"))
    assert rules.banned.tolist() == [2]
