import pytest
import torch

from tnmt import ModelConfig, Transformer
from tnmt.blocks.kv_cache import LayerKV
from tnmt.blocks.masks import padding_mask


def model_and_memory():
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=30,
        tgt_vocab_size=30,
        d_model=16,
        n_heads=2,
        n_encoder_layers=2,
        n_decoder_layers=3,
        d_ff=32,
        dropout=0.0,
        max_len=64,
        tie_output=False,
    )
    model = Transformer(config).eval()
    src = torch.tensor([[5, 6, 7, 2, 0], [8, 9, 10, 11, 2], [12, 13, 2, 0, 0]])
    src_mask = padding_mask(src, 0)
    return model, model.encode(src, src_mask), src_mask


def test_incremental_decoding_equals_full_recomputation_at_every_step():
    model, memory, src_mask = model_and_memory()
    tgt = torch.randint(3, 30, (3, 40))
    tgt[:, 0] = 1
    cache = model.init_cache(memory, src_mask)
    for t in range(tgt.size(1)):  # 40 steps: crosses the cache's first growth at 32
        step = model.decode(tgt[:, t : t + 1], None, cache=cache)
        full = model.decode(tgt[:, : t + 1], memory, memory_mask=src_mask)
        torch.testing.assert_close(step[:, 0], full[:, -1], atol=1e-5, rtol=0)
    assert cache.length == 40


def test_prefilling_several_positions_equals_stepping():
    model, memory, src_mask = model_and_memory()
    tgt = torch.randint(3, 30, (3, 6))
    cache = model.init_cache(memory, src_mask)
    block = model.decode(tgt[:, :4], None, cache=cache)
    last = model.decode(tgt[:, 4:], None, cache=cache)
    full = model.decode(tgt, memory, memory_mask=src_mask)
    torch.testing.assert_close(torch.cat([block, last], 1), full, atol=1e-5, rtol=0)


def test_reorder_follows_the_selected_rows():
    model, memory, src_mask = model_and_memory()
    tgt = torch.randint(3, 30, (3, 7))
    cache = model.init_cache(memory, src_mask)
    model.decode(tgt[:, :4], None, cache=cache)
    order = torch.tensor([2, 2, 0, 1])  # repeated and permuted rows, as beam search produces
    cache.reorder(order)
    assert cache.batch_size == 4
    steps = [model.decode(tgt[order, t : t + 1], None, cache=cache) for t in range(4, 7)]
    full = model.decode(tgt[order], memory[order], memory_mask=src_mask[order])
    torch.testing.assert_close(torch.cat(steps, 1), full[:, 4:], atol=1e-5, rtol=0)


@torch.no_grad()  # the buffer-swapping path; with autograd on, `select` copies like index_select
def test_reordering_every_step_like_beam_search_equals_recomputation():
    """Beams reordered within their sentence at every step (cross K/V untouched, spare buffers swapped),
    then a sentence dropped, across the cache's growth at 32 positions: the last step's logits equal a
    full decoder pass over each row's token history."""
    model, memory, src_mask = model_and_memory()
    generator = torch.Generator().manual_seed(1)
    cache = model.init_cache(memory, src_mask)
    cache.start_beams(2)  # rows: sentence 0, 0, 1, 1, 2, 2
    sources = torch.arange(3).repeat_interleave(2)  # (N,) the sentence of each row
    history = torch.ones(6, 1, dtype=torch.long)  # BOS
    for t in range(36):
        model.decode(history[:, -1:], None, cache=cache)
        rows = torch.arange(sources.numel())
        parents = rows // 2 * 2 + torch.randint(0, 2, rows.shape, generator=generator)  # a beam of the same sentence
        same = t != 20
        if not same:
            parents = parents[sources[parents] != 1]  # sentence 1 finishes: its rows leave
        cache.reorder(parents, same_sources=same)
        sources = sources[parents]
        history = torch.cat([history[parents], torch.randint(3, 30, (parents.numel(), 1), generator=generator)], 1)
    step = model.decode(history[:, -1:], None, cache=cache)
    full = model.decode(history, memory[sources], memory_mask=src_mask[sources])
    assert cache.batch_size == 4
    torch.testing.assert_close(step[:, 0], full[:, -1], atol=1e-5, rtol=0)


def test_beams_share_their_sentences_cross_attention_keys_and_values():
    """Two beams per sentence: 6 rows over 3 sentences' K/V, each row's logits those of its sentence alone."""
    model, memory, src_mask = model_and_memory()
    tgt = torch.randint(3, 30, (6, 5))
    cache = model.init_cache(memory, src_mask)
    cache.start_beams(2)
    assert cache.batch_size == 6 and cache.beams == 2 and cache.layers[0].cross_k.size(0) == 3
    steps = [model.decode(tgt[:, t : t + 1], None, cache=cache) for t in range(5)]
    sources = torch.arange(3).repeat_interleave(2)
    full = model.decode(tgt, memory[sources], memory_mask=src_mask[sources])
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)


def test_a_reorder_that_mixes_sentences_within_a_beam_group_is_refused():
    model, memory, src_mask = model_and_memory()
    cache = model.init_cache(memory, src_mask)
    cache.start_beams(2)
    with pytest.raises(ValueError, match="each run of 2 rows must continue one sentence"):
        cache.reorder(torch.tensor([5, 5, 0, 2]))  # rows 0 and 2: sentences 0 and 1


def test_length_advances_by_the_new_positions_in_every_layer():
    """Each decode call of T positions advances every layer's own count by T; the model bumps nothing."""
    model, memory, src_mask = model_and_memory()
    tgt = torch.randint(3, 30, (3, 36))
    cache = model.init_cache(memory, src_mask)
    assert cache.length == 0
    end, outputs = 0, []
    for t in (3, 1, 30, 2):  # a block, a step, a block across the growth at 32, another block
        outputs.append(model.decode(tgt[:, end : end + t], None, cache=cache))
        end += t
        assert [layer.length for layer in cache.layers] == [end] * 3
        assert cache.length == end
    full = model.decode(tgt, memory, memory_mask=src_mask)
    torch.testing.assert_close(torch.cat(outputs, 1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("same_sources", [False, True])
@pytest.mark.parametrize("grad", [False, True])  # no_grad swaps spare buffers; with autograd `select` copies
def test_reorder_keeps_the_length(same_sources, grad):
    model, memory, src_mask = model_and_memory()
    sources = torch.arange(3).repeat_interleave(2)  # two beams per sentence, with different histories
    tgt = torch.randint(3, 30, (6, 6))
    # Within each sentence's beams (cross K/V kept), or with a sentence dropped and the others reordered.
    order = torch.tensor([1, 0, 2, 2, 5, 4]) if same_sources else torch.tensor([5, 5, 1, 0])
    with torch.set_grad_enabled(grad):
        cache = model.init_cache(memory, src_mask)
        cache.start_beams(2)
        model.decode(tgt[:, :5], None, cache=cache)
        cache.reorder(order, same_sources=same_sources)
        assert [layer.length for layer in cache.layers] == [5] * 3
        step = model.decode(tgt[order, 5:], None, cache=cache)
    assert cache.length == 6
    full = model.decode(tgt[order], memory[sources[order]], memory_mask=src_mask[sources[order]])
    torch.testing.assert_close(step[:, 0], full[:, -1], atol=1e-5, rtol=0)


def test_layer_appends_at_its_own_length_and_select_keeps_it():
    g = torch.Generator().manual_seed(0)
    layer = LayerKV(cross_k=torch.zeros(2, 1, 3, 4), cross_v=torch.zeros(2, 1, 3, 4))
    ks = [torch.randn(2, 1, t, 4, generator=g) for t in (20, 1, 15)]  # 36 positions: grows past 32
    for i, k in enumerate(ks):
        all_k, all_v = layer.append(k, -k)
        expected = torch.cat(ks[: i + 1], 2)
        assert layer.length == expected.size(2)
        assert torch.equal(all_k, expected) and torch.equal(all_v, -expected)
    with torch.no_grad():
        layer.select(torch.tensor([1, 1, 0]))
    assert layer.length == 36
    expected = torch.cat(ks, 2)[[1, 1, 0]]
    assert torch.equal(layer.self_k[:, :, :36], expected) and torch.equal(layer.self_v[:, :, :36], -expected)


def test_a_model_without_decoder_layers_has_no_cache_but_decodes_without_one():
    """Zero decoder layers leave nothing to count positions with: a clear error, not wrong positions."""
    torch.manual_seed(0)
    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=8, n_heads=2, n_decoder_layers=0, d_ff=16)
    model = Transformer(config).eval()
    src = torch.tensor([[5, 6, 2]])
    memory = model.encode(src)
    with pytest.raises(ValueError, match="n_decoder_layers=0"):
        model.init_cache(memory, None)
    assert model.decode(torch.tensor([[1, 7, 8]]), memory).shape == (1, 3, 30)
