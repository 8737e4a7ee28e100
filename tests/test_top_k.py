import pytest
import torch

from tnmt.decode.top_k import top_k


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


def test_the_best_of_tied_scores_is_the_first():
    """Greedy search's argmax is deterministic: of equal best scores, the lowest id."""
    scores = torch.zeros(2, 300)
    scores[0, [7, 250]] = 1.0
    scores[1, [0, 299]] = 2.0
    values, index = top_k(scores, 1)
    assert index.tolist() == [[7], [0]] and values.tolist() == [[1.0], [2.0]]
