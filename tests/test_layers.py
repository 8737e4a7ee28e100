"""Encoder/decoder layers at layer level; parity of whole stacks with torch.nn.Transformer is in test_model.py."""

import pytest
import torch
from torch import nn

from tnmt.blocks.dropout import Dropout
from tnmt.blocks.layers import DecoderLayer, EncoderLayer, Residual
from tnmt.blocks.masks import causal_mask, padding_mask

D, H, F = 8, 2, 16


def layer_args(**overrides) -> dict:
    args = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, activation="relu", norm_first=False)
    return {**args, "eps": 1e-5, **overrides}


def randomize_norms(module: nn.Module) -> None:
    """LayerNorms start as the identity affine map; random ones make a misplaced norm visible."""
    with torch.no_grad():
        for norm in (m for m in module.modules() if isinstance(m, nn.LayerNorm)):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)


def encoder_layer(layer: EncoderLayer, x: torch.Tensor, mask: torch.Tensor | None, **kwargs):
    """The layer on whole sequences x (B, S, D), given as the rows (B * S, D) its body takes."""
    out, weights = layer(x.reshape(-1, D), positions=x.size(1), mask=mask, **kwargs)
    return out.view_as(x), weights


def decoder_layer(layer: DecoderLayer, x: torch.Tensor, memory: torch.Tensor, **kwargs):
    """The layer teacher-forced on whole sequences x (B, T, D) over memory (B, S, D), as rows (B * T, D)."""
    out, weights = layer(x.reshape(-1, D), positions=x.size(1), memory=memory, **kwargs)
    return out.view_as(x), weights


def layer_norm(h: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    """LayerNorm(h) with `norm`'s parameters, written as the function the formulas use."""
    return nn.functional.layer_norm(h, (D,), norm.weight, norm.bias, eps=norm.eps)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_is_the_paper_formula_or_its_pre_norm_variant(norm_first):
    torch.manual_seed(0)
    block = Residual(D, dropout=0.0, norm_first=norm_first, eps=1e-5)
    randomize_norms(block)
    sublayer = nn.Linear(D, D)
    x = torch.randn(2, 3, D)
    post = layer_norm(x + sublayer(x), block.norm)  # LayerNorm(x + Sublayer(x)), section 3.1
    pre = x + sublayer(layer_norm(x, block.norm))
    out, weights = block(x, lambda h: (sublayer(h), "weights"))
    torch.testing.assert_close(out, pre if norm_first else post)
    assert weights == "weights"  # what the sub-layer returns beside its output comes back unchanged


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_dropout_hits_the_sublayer_output_only_while_training(norm_first):
    """Same seed, same mask: the block equals its formula with Dropout on Sublayer(.) alone (section 5.4)."""
    torch.manual_seed(0)
    block = Residual(D, dropout=0.5, norm_first=norm_first, eps=1e-5).train()
    randomize_norms(block)
    sublayer, x = nn.Linear(D, D), torch.randn(4, 5, D)
    norm = block.norm
    torch.manual_seed(1)
    out, _ = block(x, lambda h: (sublayer(h), None))
    torch.manual_seed(1)
    drop = Dropout(0.5).train()
    expected = x + drop(sublayer(layer_norm(x, norm))) if norm_first else layer_norm(x + drop(sublayer(x)), norm)
    torch.testing.assert_close(out, expected)
    evaluated, _ = block.eval()(x, lambda h: (sublayer(h), None))
    assert not torch.allclose(out, evaluated)
    plain = x + sublayer(layer_norm(x, norm)) if norm_first else layer_norm(x + sublayer(x), norm)
    torch.testing.assert_close(evaluated, plain)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_ignores_padded_keys_and_returns_weights_on_request(norm_first):
    torch.manual_seed(0)
    layer = EncoderLayer(D, H, F, **layer_args(norm_first=norm_first)).eval()
    randomize_norms(layer)
    ids = torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]])
    mask = padding_mask(ids, 0)  # (B, 1, 1, S)
    x = torch.randn(2, 5, D)
    out, none = encoder_layer(layer, x, mask)
    assert none is None and out.shape == (2, 5, D)
    changed = x.clone()
    changed[0, 3:] = torch.randn(2, D)  # only padded positions of sentence 0
    torch.testing.assert_close(encoder_layer(layer, changed, mask)[0][0, :3], out[0, :3], atol=1e-6, rtol=0)
    unmasked = encoder_layer(layer, changed, None)[0][0, :3], encoder_layer(layer, x, None)[0][0, :3]
    assert not torch.allclose(*unmasked)  # the mask did it
    same, weights = encoder_layer(layer, x, mask, need_weights=True)
    torch.testing.assert_close(same, out)
    assert weights.shape == (2, H, 5, 5)
    assert (weights[0, :, :, 3:] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, H, 5))


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_is_causal_and_ignores_padded_memory(norm_first):
    torch.manual_seed(0)
    layer = DecoderLayer(D, H, F, **layer_args(norm_first=norm_first)).eval()
    randomize_norms(layer)
    x, memory = torch.randn(2, 4, D), torch.randn(2, 6, D)
    memory_mask = padding_mask(torch.tensor([[5, 6, 0, 0, 0, 0], [5, 6, 7, 8, 9, 9]]), 0)
    causal = causal_mask(4)

    def run(x: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None = causal) -> torch.Tensor:
        return decoder_layer(layer, x, memory, self_mask=self_mask, memory_mask=memory_mask)[0]

    out = run(x, memory)
    for j in range(1, 4):
        changed = x.clone()
        changed[:, j] = torch.randn(2, D)  # not a constant shift: LayerNorm would erase that under pre-norm
        torch.testing.assert_close(run(changed, memory)[:, :j], out[:, :j], atol=1e-6, rtol=0)
        assert not torch.allclose(run(changed, memory)[:, j], out[:, j])
        assert not torch.allclose(run(changed, memory, None)[:, :j], run(x, memory, None)[:, :j])  # no mask: leaks
    padded = memory.clone()
    padded[0, 2:] = torch.randn(4, D)
    torch.testing.assert_close(run(x, padded)[0], out[0], atol=1e-6, rtol=0)
    padded[0, :2] = torch.randn(2, D)
    assert not torch.allclose(run(x, padded)[0], out[0])  # real memory positions do matter


def test_decoder_layer_returns_self_and_cross_weights_on_request():
    torch.manual_seed(0)
    layer = DecoderLayer(D, H, F, **layer_args()).eval()
    x, memory = torch.randn(2, 4, D), torch.randn(2, 6, D)
    memory_mask = padding_mask(torch.tensor([[5, 6, 0, 0, 0, 0], [5, 6, 7, 8, 9, 9]]), 0)
    kwargs = dict(self_mask=causal_mask(4), memory_mask=memory_mask)
    out, none = decoder_layer(layer, x, memory, **kwargs)
    assert none is None
    same, (self_w, cross_w) = decoder_layer(layer, x, memory, **kwargs, need_weights=True)
    torch.testing.assert_close(same, out)
    assert self_w.shape == (2, H, 4, 4) and cross_w.shape == (2, H, 4, 6)
    assert (self_w.triu(diagonal=1) == 0).all()
    assert (cross_w[0, :, :, 2:] == 0).all()
    for w in (self_w, cross_w):
        torch.testing.assert_close(w.sum(-1), torch.ones(2, H, 4))
