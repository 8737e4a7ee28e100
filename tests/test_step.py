import pytest
import torch

from tnmt import ModelConfig, Transformer
from tnmt.config import DecodeConfig
from tnmt.decode.step import TokenRules, fit_source, output_limits, top_k


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
    rules = TokenRules.of(Transformer(config), min_len=2, device=torch.device("cpu"))
    scores = rules.apply_(torch.zeros(2, 6), generated=1)
    assert torch.isinf(scores[:, [0, 1, 2]]).all() and (scores[:, 3:] == 0).all()
    assert torch.isinf(rules.apply_(torch.zeros(2, 6), generated=2)[:, 2]).logical_not().all()


def test_token_rules_keep_eos_when_it_doubles_as_bos_or_pad():
    config = ModelConfig(
        src_vocab_size=6, tgt_vocab_size=6, d_model=4, n_heads=1, d_ff=4, pad_id=2, bos_id=2, eos_id=0, tie_output=False
    )  # MarianMT-style: decoding starts from pad
    rules = TokenRules.of(Transformer(config), min_len=0, device=torch.device("cpu"))
    assert rules.banned.tolist() == [2]


@pytest.mark.parametrize(
    ("shape", "k"), [((1, 8000), 1), ((16, 8000), 1), ((5, 32000), 8), ((3, 37003), 2), ((2, 500), 8)]
)
def test_top_k_equals_torch_topk(shape, k):
    torch.manual_seed(0)
    scores = torch.randn(shape)
    values, index = top_k(scores, k)
    expected_values, expected_index = scores.topk(k, dim=1)
    assert torch.equal(values, expected_values) and torch.equal(index, expected_index)


def test_top_k_with_dead_rows_returns_the_scores_it_names():
    scores = torch.full((4, 4 * 1000), float("-inf"))  # a first beam step: only beam 0 is alive
    scores[:, :1000] = torch.randn(4, 1000)
    scores[1] = float("-inf")
    values, index = top_k(scores, 8)
    assert torch.equal(values, scores.topk(8, dim=1).values)
    assert torch.equal(scores.gather(1, index), values)
