"""Layers bound to their tensors (blocks/bound.py) compute what the modules do, on the same tensors, not copies."""

import pytest
import torch
from torch import nn

from tnmt.blocks.bound import bind_linear, bind_norm
from tnmt.config import ModelConfig
from tnmt.model import Transformer
from tnmt.translate.quantize import quantize_int8


def test_a_bound_linear_and_norm_equal_their_modules_and_follow_in_place_changes():
    torch.manual_seed(0)
    linear, norm, x = nn.Linear(8, 6), nn.LayerNorm(8, eps=1e-3), torch.randn(3, 8)
    bound_linear, bound_norm = bind_linear(linear), bind_norm(norm)
    torch.testing.assert_close(bound_linear(x), linear(x), atol=0, rtol=0)
    torch.testing.assert_close(bound_norm(x), norm(x), atol=0, rtol=0)
    with torch.no_grad():
        linear.weight.mul_(2.0), norm.bias.add_(1.0)  # loading a state dict copies in place like this
    torch.testing.assert_close(bound_linear(x), linear(x), atol=0, rtol=0)
    torch.testing.assert_close(bound_norm(x), norm(x), atol=0, rtol=0)


def test_rows_of_a_stacked_projection_are_its_block():
    torch.manual_seed(0)
    stacked, x = nn.Linear(4, 12), torch.randn(2, 4)
    torch.testing.assert_close(bind_linear(stacked, slice(4, 8))(x), stacked(x)[:, 4:8], atol=1e-6, rtol=0)


def test_an_int8_linear_is_bound_as_its_own_forward():
    config = ModelConfig(
        src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32
    )
    quantized = quantize_int8(Transformer(config).eval(), min_weights=0)
    linear = quantized.decoder_layers[0].ffn.linear1
    assert type(linear) is not nn.Linear
    x = torch.randn(3, 16)
    torch.testing.assert_close(bind_linear(linear)(x), linear(x), atol=0, rtol=0)
    with pytest.raises(ValueError, match="packed"):
        bind_linear(linear, slice(0, 4))
