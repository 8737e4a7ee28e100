"""The cache on its own tensors: writes after `length`, growth, reorders (spare buffers, the sentence-run check),
beams; `tests/test_model_step.py` checks it under the decoder."""

import pytest
import torch

from tnmt.blocks.kv_cache import KVCache
from tnmt.blocks.masks import padding_mask

L, B, H, S, DH = 2, 3, 2, 4, 5


def make_cache(capacity: int = 4, mask: bool = True) -> KVCache:
    g = torch.Generator().manual_seed(0)
    cross = torch.randn(L, 2, B, H, S, DH, generator=g)
    src = torch.tensor([[5, 6, 2, 0], [5, 6, 7, 2], [5, 2, 0, 0]])
    return KVCache(cross, padding_mask(src, 0) if mask else None, capacity=capacity)


def write(cache: KVCache, values: torch.Tensor) -> None:
    """What a step does: every layer writes T positions (values (2, N, H, T, Dh)) after `length`, then advance."""
    t = values.size(3)
    cache.reserve(t)
    for i in range(L):
        layer = cache.layer(i)
        layer.kv[:, :, :, layer.length : layer.length + t] = values + i
    cache.advance(t)


def written(cache: KVCache, layer: int = 0) -> torch.Tensor:
    return cache.kv[layer, :, :, :, : cache.length]  # (2, N, H, length, Dh)


def test_positions_are_written_after_length_and_the_cache_grows_past_its_capacity():
    cache = make_cache(capacity=4)
    g = torch.Generator().manual_seed(1)
    blocks = [torch.randn(2, B, H, t, DH, generator=g) for t in (3, 1, 6, 1)]  # 11 positions: grows twice
    for i, block in enumerate(blocks):
        write(cache, block)
        expected = torch.cat(blocks[: i + 1], dim=3)
        assert cache.length == expected.size(3) and cache.capacity >= cache.length
        assert torch.equal(written(cache), expected) and torch.equal(written(cache, 1), expected + 1)
    assert cache.capacity == 16  # 4 -> 8 -> 16: doubled, not grown by one each time


def test_the_source_mask_becomes_an_additive_bias_over_the_heads_once():
    cache = make_cache()
    bias = cache.layer(0).bias  # (B, H, 1, S)
    assert bias.shape == (B, H, 1, S) and bias.is_contiguous()
    assert torch.equal(bias[:, 0, 0] == float("-inf"), torch.tensor([[0, 0, 0, 1], [0, 0, 0, 0], [0, 0, 1, 1]]).bool())
    assert make_cache(mask=False).layer(0).bias is None


@pytest.mark.parametrize("same_sources", [False, True])
def test_reorder_keeps_the_chosen_rows_and_the_length_and_swaps_in_a_spare_buffer(same_sources):
    cache = make_cache(capacity=8)
    cache.start_beams(2)  # rows: sentence 0, 0, 1, 1, 2, 2
    block = torch.randn(2, 6, H, 3, DH)
    write(cache, block)
    order = torch.tensor([1, 0, 2, 2, 5, 4]) if same_sources else torch.tensor([5, 5, 1, 0])
    cross = cache.cross
    cache.reorder(order, same_sources=same_sources)
    assert cache.length == 3 and cache.batch_size == order.numel()
    assert torch.equal(written(cache), block[:, order])
    if same_sources:
        assert cache.cross is cross  # a reorder within each sentence's beams copies nothing of them
    else:
        assert torch.equal(cache.cross, cross[:, :, [2, 0]]) and cache.layer(0).bias.size(0) == 2
    first = cache.kv
    cache.reorder(torch.arange(cache.batch_size), same_sources=True)
    cache.reorder(torch.arange(cache.batch_size), same_sources=True)
    assert cache.kv.data_ptr() == first.data_ptr()  # two buffers take turns: a step allocates nothing


def test_a_reorder_that_mixes_sentences_within_a_beam_group_is_refused():
    cache = make_cache()
    cache.start_beams(2)
    with pytest.raises(ValueError, match="each run of 2 rows must continue one sentence"):
        cache.reorder(torch.tensor([5, 5, 0, 2]))  # rows 0 and 2: sentences 0 and 1


def test_beams_repeat_each_row_and_share_their_sentences_cross_attention():
    cache = make_cache()
    write(cache, torch.randn(2, B, H, 2, DH))
    before = written(cache).clone()
    cache.start_beams(3)
    assert (cache.beams, cache.batch_size, cache.cross.size(2)) == (3, 9, 3)
    assert torch.equal(written(cache), before.repeat_interleave(3, dim=1))
    assert cache.layer(1).beams == 3 and cache.layer(1).cross_k.size(0) == B
