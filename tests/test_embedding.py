import math

import pytest
import torch

from tnmt.blocks.embedding import TokenEmbedding

IDS = torch.tensor([[4, 5, 0], [9, 9, 1]])


@pytest.mark.parametrize("scale", [True, False])
def test_rows_of_the_matrix_times_sqrt_d_model_unless_switched_off(scale):
    torch.manual_seed(0)
    embed = TokenEmbedding(10, 16, pad_id=0, scale=scale)
    out = embed(IDS)
    assert out.shape == (2, 3, 16)
    factor = math.sqrt(16) if scale else 1.0
    for b in range(2):
        for t in range(3):
            torch.testing.assert_close(out[b, t], embed.weight[IDS[b, t]] * factor)


def test_initial_rows_have_std_inverse_sqrt_d_model_so_scaled_rows_have_norm_about_sqrt_d_model():
    torch.manual_seed(0)
    embed = TokenEmbedding(4000, 64, pad_id=0)
    assert embed.weight[1:].std().item() == pytest.approx(64**-0.5, rel=0.02)
    norms = embed(torch.arange(1, 4000)).norm(dim=-1)
    assert norms.mean().item() == pytest.approx(math.sqrt(64), rel=0.02)


def test_pad_row_starts_at_zero_but_stays_trainable():
    """Pad embeds to zeros at first; unlike nn.Embedding(padding_idx=...) its row is not frozen, which
    MarianMT-style models need because they start decoding from the pad token."""
    torch.manual_seed(0)
    embed = TokenEmbedding(10, 8, pad_id=3)
    assert (embed.weight[3] == 0).all() and (embed.weight.abs().sum(-1)[[0, 1, 2, 4]] > 0).all()
    assert (embed(torch.tensor([[3, 3]])) == 0).all()
    embed(torch.tensor([[3, 5]])).sum().backward()
    assert (embed.weight.grad[3] != 0).all() and (embed.weight.grad[[0, 1, 2, 4]] == 0).all()


def test_pad_id_outside_the_vocabulary_zeroes_no_row():
    torch.manual_seed(0)
    embed = TokenEmbedding(10, 8, pad_id=10)
    assert (embed.weight.abs().sum(-1) > 0).all()
