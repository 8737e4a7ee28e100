import pytest
import torch

from tnmt import ModelConfig, Transformer
from tnmt.blocks.kv_cache import KVCache
from tnmt.blocks.masks import padding_mask
from tnmt.config import DecodeConfig
from tnmt.decode import fast_step
from tnmt.decode.fast_step import FastDecoder, StaticCache
from tnmt.decode.quantize import quantize_int8
from tnmt.decode.search import search
from tnmt.decode.step import start_decoding
from tnmt.decode.trace import SearchRecorder

SOURCES = torch.tensor([[5, 6, 7, 2, 0], [8, 9, 10, 11, 2], [12, 13, 2, 0, 0]])
VARIANTS = {  # every option the step writes out by hand
    "paper": {},
    "pre-norm, gelu, learned positions, logits bias": dict(
        norm_first=True, activation="gelu", positional="learned", final_logits_bias=True
    ),
    "swish, concat sinusoids, unscaled, tied": dict(
        activation="swish", positional_layout="concat", scale_embeddings=False, share_embeddings=True, tie_output=True
    ),
}


def make_model(**options) -> Transformer:
    torch.manual_seed(0)
    shape = dict(d_model=16, n_heads=2, n_encoder_layers=2, n_decoder_layers=3, d_ff=32, tie_output=False)
    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, dropout=0.0, max_len=64, **(shape | options))
    model = Transformer(config).eval()
    with torch.no_grad():
        for p in model.parameters():  # away from the init's zero biases and unit norms, so each one matters
            p.add_(torch.randn_like(p) * 0.1)
        model.output.weight.mul_(3.0)  # peakier outputs: searches end at various lengths
    return model


@pytest.fixture(params=list(VARIANTS), scope="module")
def model(request) -> Transformer:
    return make_model(**VARIANTS[request.param])


@pytest.fixture(autouse=True, params=["one kernel", "batched products"])
def attention_path(request, monkeypatch):
    """Both ways `_attend` computes attention, whatever the test's batch."""
    monkeypatch.setattr(fast_step, "BMM_GROUPS", 10**9 if request.param == "one kernel" else 1)


@torch.inference_mode()
def test_static_cache_equals_the_module_cache_and_recomputation_at_every_step(model):
    """Past its capacity too (5 asked, 12 decoded): it grows rather than fail."""
    tgt = torch.randint(3, 30, (3, 12), generator=torch.Generator().manual_seed(1))
    tgt[:, 0] = model.config.bos_id
    fast = start_decoding(model, SOURCES, fast_capacity=5)
    slow = start_decoding(model, SOURCES)
    assert isinstance(fast, StaticCache) and isinstance(slow, KVCache)
    src_mask = padding_mask(SOURCES, 0)
    memory = model.encode(SOURCES, src_mask)
    for t in range(tgt.size(1)):
        step = fast.step(tgt[:, t])
        module = model.decode(tgt[:, t : t + 1], None, cache=slow)[:, 0]
        full = model.decode(tgt[:, : t + 1], memory, memory_mask=src_mask)[:, -1]
        torch.testing.assert_close(step, module, atol=1e-5, rtol=0)
        torch.testing.assert_close(step, full, atol=1e-5, rtol=0)
    assert fast.length == slow.length == 12


@torch.inference_mode()
def test_reordering_like_beam_search_then_dropping_a_sentence_equals_recomputation(model):
    """Beams reordered within their sentence every step (spare buffers swapped, cross K/V untouched), one
    sentence leaving at step 7: the last step equals a full decoder pass over each row's history."""
    generator = torch.Generator().manual_seed(2)
    cache = start_decoding(model, SOURCES, fast_capacity=16)
    cache.start_beams(2)  # rows: sentence 0, 0, 1, 1, 2, 2
    assert (cache.batch_size, cache.beams, cache.cross.size(2)) == (6, 2, 3)
    sources = torch.arange(3).repeat_interleave(2)  # (N,) the sentence of each row
    history = torch.ones(6, 1, dtype=torch.long)  # BOS
    for t in range(12):
        cache.step(history[:, -1])
        rows = torch.arange(sources.numel())
        parents = rows // 2 * 2 + torch.randint(0, 2, rows.shape, generator=generator)
        same = t != 7
        if not same:
            parents = parents[sources[parents] != 1]
        cache.reorder(parents, same_sources=same)
        sources = sources[parents]
        history = torch.cat([history[parents], torch.randint(3, 30, (parents.numel(), 1), generator=generator)], 1)
    step = cache.step(history[:, -1])
    src = SOURCES[sources]
    full = model(src, history)[:, -1]
    assert cache.batch_size == 4
    torch.testing.assert_close(step, full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("settings", [DecodeConfig(beam_size=1), DecodeConfig(beam_size=3, length_penalty=1.0)])
def test_searches_find_the_same_hypotheses_on_the_fast_step_and_through_the_modules(model, settings):
    fast = search(model, SOURCES, settings, n_best=settings.beam_size)
    slow = search(model, SOURCES, settings, n_best=settings.beam_size, fast=False)
    assert [[h.tokens for h in hyps] for hyps in fast] == [[h.tokens for h in hyps] for hyps in slow]
    for a, b in zip(sum(fast, []), sum(slow, []), strict=True):
        assert a.log_prob == pytest.approx(b.log_prob, abs=1e-4)


def test_beam_search_of_a_batch_equals_its_sentences_one_at_a_time(model):
    settings = DecodeConfig(beam_size=4)
    batch = search(model, SOURCES, settings, n_best=2)
    for i, found in enumerate(batch):
        length = int((SOURCES[i] != 0).sum())
        alone = search(model, SOURCES[i : i + 1, :length], settings, n_best=2)[0]
        assert [h.tokens for h in found] == [h.tokens for h in alone]
        assert [h.score for h in found] == pytest.approx([h.score for h in alone], abs=1e-4)


@torch.inference_mode()
def test_int8_models_take_the_fast_step_with_the_same_logits():
    """Activations are quantised per call, so float rounding (the embedding's scale added in another order)
    may move an int8 value by one step: close, not equal, and the same short outputs."""
    quantized = quantize_int8(make_model(d_model=32, n_heads=4), min_weights=0)  # every Linear, cross split
    fast, slow = start_decoding(quantized, SOURCES, fast_capacity=6), start_decoding(quantized, SOURCES)
    for token in (1, 7, 8, 9, 10, 11):
        tokens = torch.full((3,), token)
        step, module = fast.step(tokens), quantized.decode(tokens[:, None], None, cache=slow)[:, 0]
        torch.testing.assert_close(step, module, atol=0.05, rtol=0)
    settings = DecodeConfig(beam_size=2, max_len=6)
    outputs = [[h[0].tokens for h in search(quantized, SOURCES, settings, fast=f)] for f in (True, False)]
    assert outputs[0] == outputs[1]


def test_a_traced_search_falls_back_to_the_modules_and_finds_the_same_hypothesis(monkeypatch):
    """A recorder needs every step's cross-attention, which only the module path writes out."""
    model = make_model()
    steps = []
    monkeypatch.setattr(StaticCache, "step", lambda self, tokens: steps.append(tokens))
    recorder = SearchRecorder(top_k=3, length_penalty=0.6, eos_id=model.config.eos_id)
    traced = search(model, SOURCES[:1, :4], DecodeConfig(beam_size=2), recorder=recorder)
    monkeypatch.undo()
    assert steps == []
    assert traced[0][0].tokens == search(model, SOURCES[:1, :4], DecodeConfig(beam_size=2))[0][0].tokens


def test_a_decoder_without_layers_is_not_supported_and_keeps_the_module_path():
    model = make_model(n_decoder_layers=0)
    assert not FastDecoder.supports(model)
    with pytest.raises(ValueError, match="at least one decoder layer"):
        start_decoding(model, SOURCES, fast_capacity=8)  # the module path's own refusal, unchanged


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("rows", [1, 3])  # the output projection's transposed copy, then its packed copy
def test_the_step_follows_weights_changed_between_searches(frozen, rows):
    """Changed in place (the version counter moves) or replaced: the next search sees the weights as they are.
    Trainable weights also when swapped in and out as the moving average does (`.data`, which keeps the
    counter): their copies last one search. Frozen ones are a `Translator`'s own, which nothing swaps."""
    model = make_model().requires_grad_(not frozen)
    src, tokens = SOURCES[:rows], torch.tensor([4, 5, 6])[:rows]

    def fast_and_module():
        with torch.inference_mode():
            step = start_decoding(model, src, fast_capacity=4).step(tokens)
            module = model.decode(tokens[:, None], None, cache=start_decoding(model, src))[:, 0]
        torch.testing.assert_close(step, module, atol=1e-5, rtol=1e-5)  # logits grow with the weights
        return step

    before = fast_and_module()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
    changed = fast_and_module()
    assert not torch.allclose(before, changed)
    if frozen:  # replaced by other tensors, as `.to()` or `.double()` would
        for p in model.parameters():
            p.data = p.data.clone() * 2.0
        assert not torch.allclose(changed, fast_and_module())
        return
    shadow = [p.detach().clone() * 0.5 for p in model.parameters()]
    for p, s in zip(model.parameters(), shadow, strict=True):
        p.data, s.data = s.data, p.data
    swapped = fast_and_module()
    for p, s in zip(model.parameters(), shadow, strict=True):
        p.data, s.data = s.data, p.data
        s.mul_(2.0)  # the average moves while it is out
    for p, s in zip(model.parameters(), shadow, strict=True):
        p.data, s.data = s.data, p.data
    assert not torch.allclose(swapped, fast_and_module())


@torch.inference_mode()
def test_a_model_converted_after_a_search_is_decoded_as_it_is_now():
    """Nothing of a model is kept between searches: converted to float64, it decodes in float64."""
    model = make_model()
    start_decoding(model, SOURCES, fast_capacity=4).step(torch.tensor([4, 5, 6]))
    model.double()
    step = start_decoding(model, SOURCES, fast_capacity=4).step(torch.tensor([4, 5, 6]))
    module = model.decode(torch.tensor([[4], [5], [6]]), None, cache=start_decoding(model, SOURCES))[:, 0]
    assert step.dtype == torch.float64
    torch.testing.assert_close(step, module, atol=1e-9, rtol=0)
