import math

import pytest
import torch

from tnmt.blocks.dropout import Dropout
from tnmt.blocks.feed_forward import FeedForward

# Written out rather than taken from torch.nn.functional, so a swapped table entry cannot pass.
BY_HAND = {
    "relu": lambda h: h.clamp(min=0),  # Eq. 2: max(0, x W_1 + b_1)
    "gelu": lambda h: 0.5 * h * (1 + torch.erf(h / math.sqrt(2))),  # exact GELU, not the tanh approximation
    "swish": lambda h: h * torch.sigmoid(h),
}


@pytest.mark.parametrize("activation", sorted(BY_HAND))
def test_equals_linear2_of_activation_of_linear1(activation):
    torch.manual_seed(0)
    ffn = FeedForward(8, 32, activation=activation).eval()
    x = torch.randn(2, 5, 8)
    expected = ffn.linear2(BY_HAND[activation](ffn.linear1(x)))
    out = ffn(x)
    assert out.shape == (2, 5, 8)
    torch.testing.assert_close(out, expected)


def test_position_wise():
    """The same map at every position: permuting positions permutes the output."""
    torch.manual_seed(0)
    ffn = FeedForward(8, 32)
    x = torch.randn(2, 5, 8)
    perm = torch.tensor([3, 0, 4, 1, 2])
    torch.testing.assert_close(ffn(x[:, perm]), ffn(x)[:, perm])


def test_activation_dropout_only_while_training_and_on_the_hidden_units():
    torch.manual_seed(0)
    ffn = FeedForward(8, 32, dropout=0.5)
    x = torch.randn(2, 5, 8)
    plain = ffn.linear2(ffn.linear1(x).relu())
    torch.testing.assert_close(ffn.eval()(x), plain)
    ffn.train()
    torch.manual_seed(1)
    out = ffn(x)
    torch.manual_seed(1)
    expected = ffn.linear2(Dropout(0.5).train()(ffn.linear1(x).relu()))  # same seed, same mask
    torch.testing.assert_close(out, expected)
    assert not torch.allclose(out, plain)


def test_unknown_activation_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"\['gelu', 'relu', 'swish'\].*'tanh'"):
        FeedForward(8, 32, activation="tanh")


@pytest.mark.parametrize("activation", ["relu", "gelu", "swish"])
def test_the_hidden_units_are_what_the_second_layer_reads(activation):
    """The hidden units it reports (what `tnmt inspect` shows) are its own hidden layer: W_2 of them is the output."""
    torch.manual_seed(0)
    ffn = FeedForward(8, 32, activation=activation).eval()
    x = torch.randn(2, 3, 8)
    recorded = {}
    out = ffn.bind(record=lambda **tensors: recorded.update(tensors))(x)
    assert recorded["hidden"].shape == (2, 3, 32)
    torch.testing.assert_close(ffn.linear2(recorded["hidden"]), out)
    torch.testing.assert_close(out, ffn(x))
