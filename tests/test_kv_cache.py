import torch

from tnmt import ModelConfig, Transformer
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
    cache.repeat_interleave(2)  # rows: sentence 0, 0, 1, 1, 2, 2
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


def test_repeat_interleave_starts_beams():
    model, memory, src_mask = model_and_memory()
    cache = model.init_cache(memory, src_mask)
    cache.repeat_interleave(2)
    assert cache.batch_size == 6
    assert torch.equal(cache.layers[0].cross_k[0], cache.layers[0].cross_k[1])
