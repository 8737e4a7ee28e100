import pytest
import torch

from tnmt.blocks.dropout import Dropout, random_15_bits


def test_drops_about_p_and_preserves_the_expectation():
    torch.manual_seed(0)
    out = Dropout(0.1).train()(torch.ones(1000, 1000))
    kept = out != 0
    assert kept.float().mean().item() == pytest.approx(0.9, abs=2e-3)
    assert out.mean().item() == pytest.approx(1.0, abs=3e-3)
    assert torch.allclose(out[kept], torch.tensor(1 / (1 - round(0.1 * 2**15) / 2**15)))


def test_gradient_is_the_same_mask_and_scale():
    torch.manual_seed(0)
    x = torch.randn(50, 40, requires_grad=True)
    out = Dropout(0.3).train()(x)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close(x.grad * x, out)


def test_identity_in_eval_mode_or_with_p_zero_and_seeded_while_training():
    x = torch.randn(8, 16)
    assert Dropout(0.5).eval()(x) is x
    assert Dropout(0.0).train()(x) is x
    torch.manual_seed(3)
    first = Dropout(0.5).train()(x)
    torch.manual_seed(3)
    assert torch.equal(Dropout(0.5).train()(x), first)


def test_keeps_the_dtype():
    assert Dropout(0.1).train()(torch.randn(4, 4).bfloat16()).dtype == torch.bfloat16


@pytest.mark.parametrize("p", [-0.1, 1.0])
def test_rejects_probabilities_outside_0_1(p):
    with pytest.raises(ValueError, match="dropout"):
        Dropout(p)


def test_random_bits_are_uniform_in_every_lane():
    torch.manual_seed(0)
    bits = random_15_bits(torch.Size([4, 100_001]))  # not a multiple of 4 elements
    assert bits.dtype == torch.int16 and bits.shape == (4, 100_001)
    assert bits.min().item() == 0 and bits.max().item() == 2**15 - 1
    lanes = bits.flatten()[:400_000].view(-1, 4).float()
    torch.testing.assert_close(lanes.mean(0), torch.full((4,), (2**15 - 1) / 2), rtol=5e-3, atol=0)
