"""blocks/kernels.py: every way Eq. 1 is computed gives Eq. 1 written out (`reference_attention`)."""

import pytest
import torch

from tnmt.blocks.attention import reference_attention
from tnmt.blocks.kernels import attention, batched_attention, softmax_rows
from tnmt.blocks.masks import additive_mask, causal_mask, padding_mask


def qkv(b=2, h=3, tq=5, tk=6, dh=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, h, tq, dh, generator=g),
        torch.randn(b, h, tk, dh, generator=g),
        torch.randn(b, h, tk, dh, generator=g),
    )


@pytest.mark.parametrize("kind", ["none", "padding", "causal", "both"])
def test_fast_path_equals_reference(kind):
    q, k, v = qkv(tq=6, tk=6)
    ids = torch.tensor([[5, 6, 7, 8, 0, 0], [5, 6, 7, 8, 9, 9]])
    mask = {
        "none": None,
        "padding": padding_mask(ids, 0),
        "causal": causal_mask(6),
        "both": padding_mask(ids, 0) & causal_mask(6),
    }[kind]
    ref, weights = reference_attention(q, k, v, mask)
    fast, none = attention(q, k, v, mask)
    assert none is None
    torch.testing.assert_close(fast, ref, atol=1e-6, rtol=0)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 6))
    if mask is not None:
        assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()


def test_bf16_training_path_matches_the_fused_kernel_and_hides_the_weights():
    q, k, v = (x.bfloat16().requires_grad_() for x in qkv(tq=6, tk=6))
    mask = padding_mask(torch.tensor([[5, 6, 7, 0, 0, 0], [5, 6, 7, 8, 9, 9]]), 0) & causal_mask(6)
    out, weights = attention(q, k, v, mask)  # requires grad in bf16 on CPU: the written-out path
    assert weights is None
    with torch.no_grad():
        fused, _ = attention(q, k, v, mask)
    torch.testing.assert_close(out.float(), fused.float(), atol=2e-2, rtol=0)
    out.float().sum().backward()
    assert q.grad is not None and q.grad.dtype == torch.bfloat16


def test_batched_products_equal_the_fused_kernel_with_a_bool_or_additive_mask():
    q, k, v = qkv(tq=2, tk=7)
    mask = padding_mask(torch.tensor([[5, 6, 7, 0, 0, 0, 0], [5, 6, 7, 8, 9, 9, 9]]), 0)  # (B, 1, 1, Tk)
    fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(batched_attention(q, k, v, mask), fused, atol=1e-6, rtol=0)
    torch.testing.assert_close(batched_attention(q, k, v, additive_mask(mask, q.dtype)), fused, atol=1e-6, rtol=0)
    torch.testing.assert_close(batched_attention(q, k, v, None), attention(q, k, v)[0], atol=1e-6, rtol=0)


@pytest.mark.parametrize("shape", [(256, 1, 14), (64, 4, 3), (300, 1, 2), (8, 1, 5), (256, 1, 20)])
def test_softmax_across_short_rows_equals_the_softmax_of_each_row(shape):
    """Short rows of many (`softmax_rows`'s transposed path) and the rest (the plain kernel) alike; -inf masks."""
    scores = torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 4
    scores[..., 0] = float("-inf")  # a masked key in every row (no row is all masked)
    scores[..., -1] = 30.0
    rows = softmax_rows(scores)
    torch.testing.assert_close(rows, scores.softmax(dim=-1), atol=1e-6, rtol=0)
    assert rows.is_contiguous() and bool((rows[..., 0] == 0).all())
