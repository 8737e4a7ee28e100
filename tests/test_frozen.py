"""A frozen model's products on weight copies (translate/frozen.py) equal the model's own, whatever the rows."""

import pytest
import torch
from torch import nn

from tnmt import ModelConfig, Transformer
from tnmt.blocks.bound import bind_linear
from tnmt.translate import frozen
from tnmt.translate.frozen import OutputProjection, transposed_linear
from tnmt.translate.quantize import quantize_int8


@pytest.mark.parametrize("rows", [1, 3, frozen.TRANSPOSED_MAX_ROWS, frozen.TRANSPOSED_MAX_ROWS + 1])
@pytest.mark.parametrize("part", [None, slice(0, 5)])
def test_a_transposed_linear_equals_the_layer_at_every_row_count(rows, part):
    torch.manual_seed(0)
    linear, x = nn.Linear(16, 15), torch.randn(rows, 16)
    expected = bind_linear(linear, part)(x)
    torch.testing.assert_close(transposed_linear(linear, part)(x), expected, atol=1e-5, rtol=0)
    linear.bias = None
    torch.testing.assert_close(transposed_linear(linear)(x), linear(x), atol=1e-5, rtol=0)


def test_layers_copies_would_not_help_are_bound_as_they_are():
    config = ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2, d_ff=32)
    int8 = quantize_int8(Transformer(config).eval(), min_weights=0).decoder_layers[0].ffn.linear1
    double = nn.Linear(4, 4).double()
    assert transposed_linear(int8) == bind_linear(int8)  # the layer's own forward, packed weights and all
    x = torch.randn(2, 4, dtype=torch.float64)
    torch.testing.assert_close(transposed_linear(double)(x), double(x), atol=0, rtol=0)


@pytest.mark.parametrize("rows", [1, 2, 9])
def test_the_output_projection_equals_the_models(rows):
    torch.manual_seed(0)
    config = ModelConfig(src_vocab_size=50, tgt_vocab_size=50, d_model=16, n_heads=2, final_logits_bias=True)
    model = Transformer(config).eval()
    with torch.no_grad():
        model.logits_bias.normal_()
    assert OutputProjection.usable(model)
    features = torch.randn(rows, 16)
    torch.testing.assert_close(OutputProjection(model)(features), model.project(features), atol=1e-5, rtol=0)
