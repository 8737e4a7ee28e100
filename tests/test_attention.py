import math

import pytest
import torch
from torch import nn

from tnmt.blocks.attention import MultiHeadAttention, reference_attention
from tnmt.blocks.kv_cache import LayerCache
from tnmt.blocks.masks import causal_mask, padding_mask


def test_reference_matches_hand_computed_example():
    q = torch.tensor([[[1.0, 0.0]]])  # (1, Tq=1, Dh=2)
    k = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # (1, Tk=2, 2)
    v = torch.tensor([[[10.0, 0.0], [0.0, 20.0]]])
    out, w = reference_attention(q, k, v)
    s = 1 / math.sqrt(2)  # scores are [1/sqrt(2), 0]
    w0 = math.exp(s) / (math.exp(s) + 1)
    assert torch.allclose(w, torch.tensor([[[w0, 1 - w0]]]))
    assert torch.allclose(out, torch.tensor([[[10 * w0, 20 * (1 - w0)]]]))


def copy_to_torch(ours: MultiHeadAttention, d: int, h: int) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(d, h, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.in_proj.weight)
        ref.in_proj_bias.copy_(ours.in_proj.bias)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref.eval()


def test_self_attention_matches_torch_multihead_attention():
    torch.manual_seed(0)
    d, h = 16, 4
    ours = MultiHeadAttention(d, h).eval()
    ref = copy_to_torch(ours, d, h)
    x = torch.randn(2, 5, d)
    ids = torch.tensor([[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]])
    mask = padding_mask(ids, 0) & causal_mask(5)
    out, w = ours.self_attention(x, mask, need_weights=True)
    expected, expected_w = ref(
        x, x, x, key_padding_mask=ids == 0, attn_mask=~causal_mask(5)[0, 0], average_attn_weights=False
    )
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(w, expected_w, atol=1e-5, rtol=0)


def test_cross_attention_matches_torch_multihead_attention():
    torch.manual_seed(1)
    d, h = 16, 2
    ours = MultiHeadAttention(d, h).eval()
    ref = copy_to_torch(ours, d, h)
    x, memory = torch.randn(2, 3, d), torch.randn(2, 6, d)
    src = torch.tensor([[4, 4, 4, 4, 0, 0], [4, 4, 4, 4, 4, 4]])
    out, _ = ours.cross_attention(x, memory, padding_mask(src, 0))
    expected, _ = ref(x, memory, memory, key_padding_mask=src == 0)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_split_cross_projections_change_no_output_and_leave_no_stacked_matrix():
    torch.manual_seed(3)
    d, h = 16, 4
    ours = MultiHeadAttention(d, h).eval()
    x, memory = torch.randn(2, 3, d), torch.randn(2, 6, d)
    mask = padding_mask(torch.tensor([[4, 4, 4, 4, 0, 0], [4, 4, 4, 4, 4, 4]]), 0)
    stacked, _ = ours.cross_attention(x, memory, mask)
    stacked_kv = ours.project_kv(memory)
    ours.split_cross_projections()
    split, _ = ours.cross_attention(x, memory, mask)
    assert ours.in_proj is None and {"q_proj.weight", "kv_proj.bias"} <= set(ours.state_dict())
    torch.testing.assert_close(split, stacked, atol=1e-6, rtol=0)
    for before, after in zip(stacked_kv, ours.project_kv(memory), strict=True):
        torch.testing.assert_close(after, before, atol=1e-6, rtol=0)


def test_heads_must_divide_d_model():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)


def test_self_attention_step_writes_after_the_cached_positions_and_equals_causal_attention():
    """Feeding x in blocks through a cache equals causal self-attention over all of x at once."""
    torch.manual_seed(2)
    d, h = 16, 4
    ours = MultiHeadAttention(d, h).eval()
    x = torch.randn(2, 6, d)
    full, _ = ours.self_attention(x, causal_mask(6))
    kv = torch.zeros(2, 2, h, 6, d // h)  # (2, N, H, capacity, Dh)
    empty = torch.empty(2, h, 0, d // h)
    outputs, start = [], 0
    for t in (4, 1, 1):  # L = 0, T = 4; then steps that see every cached key
        layer = LayerCache(kv, kv[0], kv[1], empty, empty, None, length=start, beams=1)
        out, _ = ours.bind(cross=False).self_attention(x[:, start : start + t].reshape(-1, d), layer, positions=t)
        outputs.append(out.view(2, t, d))
        start += t
    torch.testing.assert_close(torch.cat(outputs, 1), full, atol=1e-5, rtol=0)
