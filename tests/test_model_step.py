"""`Transformer.step`, the one incremental decoder: equal to `forward` on the prefix for every model variant, on
a cache past its capacity, through beam reorders with a sentence leaving, batched or not, in train mode, int8."""

import dataclasses

import pytest
import torch

from tnmt import ModelConfig, Transformer
from tnmt.blocks import kernels
from tnmt.blocks.attention import BoundAttention
from tnmt.blocks.layers import DecoderLayer
from tnmt.blocks.masks import padding_mask
from tnmt.config import Architecture, DecodeConfig
from tnmt.decode.search import search
from tnmt.translate.quantize import quantize_int8

SOURCES = torch.tensor([[5, 6, 7, 2, 0], [8, 9, 10, 11, 2], [12, 13, 2, 0, 0]])
VARIANTS = {  # together they set every ModelConfig option away from its default
    "paper": {},
    "pre-norm, gelu, learned positions, logits bias, no decoder dropout": dict(
        norm_first=True, activation="gelu", positional="learned", final_logits_bias=True, layer_norm_eps=1e-6
    ),
    "swish, concat sinusoids, unscaled, tied and shared": dict(
        activation="swish", positional_layout="concat", scale_embeddings=False, share_embeddings=True, tie_output=True
    ),
}
# Every Architecture field, and whether the step reads it through the modules it shares with `forward`. A new
# option must be added here, with a variant above that sets it, after checking that the step honours it.
STEP_HANDLES = {
    "d_model": "shapes",
    "n_heads": "shapes",
    "n_encoder_layers": "encoder (encode_for_decoding runs the encoder's forward)",
    "n_decoder_layers": "the layers' step",
    "d_ff": "FeedForward",
    "dropout": "BoundResidual.add and the embedding dropout, in train mode",
    "attention_dropout": "BoundAttention (MultiHeadAttention.bind), in train mode",
    "activation_dropout": "FeedForward, in train mode",
    "max_len": "PositionalEncoding",
    "positional": "PositionalEncoding",
    "positional_layout": "PositionalEncoding",
    "norm_first": "BoundResidual.inner/add and decoder_norm",
    "activation": "FeedForward",
    "share_embeddings": "tgt_embed",
    "tie_output": "output",
    "scale_embeddings": "TokenEmbedding",
    "layer_norm_eps": "LayerNorm modules",
    "final_logits_bias": "Transformer.project (or the Translator's OutputProjection)",
}


def make_model(**options) -> Transformer:
    torch.manual_seed(0)
    shape = dict(d_model=16, n_heads=2, n_encoder_layers=2, n_decoder_layers=3, d_ff=32, tie_output=False, dropout=0.0)
    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, max_len=64, **(shape | options))
    model = Transformer(config).eval()
    with torch.no_grad():
        for p in model.parameters():  # away from the init's zero biases and unit norms, so each one matters
            p.add_(torch.randn_like(p) * 0.1)
        model.output.weight.mul_(3.0)  # peakier outputs: searches end at various lengths
    return model


@pytest.fixture(params=list(VARIANTS), scope="module")
def model(request) -> Transformer:
    return make_model(**VARIANTS[request.param])


@pytest.fixture(autouse=True, params=["fused kernel", "batched products"])
def attention_path(request, monkeypatch):
    """Both ways a decoder step's attention is computed on CPU, whatever the test's batch."""
    groups = 10**9 if request.param == "fused kernel" else 1
    monkeypatch.setattr(kernels, "BATCHED_MIN_GROUPS", groups)


def test_the_guard_lists_every_model_option():
    assert set(STEP_HANDLES) == {f.name for f in dataclasses.fields(Architecture)}, "a new option: check the step"


@torch.inference_mode()
def test_step_equals_forward_on_the_prefix_at_every_position_past_the_capacity(model):
    """5 positions asked, 12 decoded: the cache grows rather than fail."""
    tgt = torch.randint(3, 30, (3, 12), generator=torch.Generator().manual_seed(1))
    tgt[:, 0] = model.config.bos_id
    source = model.encode_for_decoding(SOURCES)
    cache = source.cache(5)
    for t in range(tgt.size(1)):
        logits, _ = model.step(tgt[:, t : t + 1], cache)
        torch.testing.assert_close(logits[:, 0], model(SOURCES, tgt[:, : t + 1])[:, -1], atol=1e-5, rtol=0)
    assert cache.length == 12 and cache.capacity >= 12


@torch.inference_mode()
def test_a_block_of_positions_equals_stepping_and_returns_the_forward_passs_weights(model):
    tgt = torch.randint(3, 30, (3, 7), generator=torch.Generator().manual_seed(3))
    source = model.encode_for_decoding(SOURCES)
    block, weights = model.step(tgt, source.cache(7), need_weights=True)
    torch.testing.assert_close(block, model(SOURCES, tgt), atol=1e-5, rtol=0)
    _, maps = model.attention_maps(SOURCES, tgt)
    for (self_w, cross_w), self_ref, cross_ref in zip(weights, maps.decoder_self, maps.cross, strict=True):
        # target padding is no matter here: tgt has none, and a causal query never sees a later pad
        torch.testing.assert_close(self_w, self_ref, atol=1e-6, rtol=0)
        torch.testing.assert_close(cross_w, cross_ref, atol=1e-6, rtol=0)


@torch.inference_mode()
def test_beam_reorders_then_a_sentence_leaving_equal_recomputation(model):
    """Beams reordered within their sentence every step (spare buffers swapped, cross K/V untouched), one
    sentence leaving at step 7: the last step equals a full decoder pass over each row's history."""
    generator = torch.Generator().manual_seed(2)
    cache = model.encode_for_decoding(SOURCES).cache(16)
    cache.start_beams(2)  # rows: sentence 0, 0, 1, 1, 2, 2
    assert (cache.batch_size, cache.beams, cache.cross.size(2)) == (6, 2, 3)
    sources = torch.arange(3).repeat_interleave(2)  # (N,) the sentence of each row
    history = torch.ones(6, 1, dtype=torch.long)  # BOS
    for t in range(12):
        model.step(history[:, -1:], cache)
        rows = torch.arange(sources.numel())
        parents = rows // 2 * 2 + torch.randint(0, 2, rows.shape, generator=generator)
        same = t != 7
        if not same:
            parents = parents[sources[parents] != 1]
        cache.reorder(parents, same_sources=same)
        sources = sources[parents]
        history = torch.cat([history[parents], torch.randint(3, 30, (parents.numel(), 1), generator=generator)], 1)
    step, _ = model.step(history[:, -1:], cache)
    assert cache.batch_size == 4
    torch.testing.assert_close(step[:, 0], model(SOURCES[sources], history)[:, -1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("settings", [DecodeConfig(beam_size=1), DecodeConfig(beam_size=4, length_penalty=1.0)])
def test_a_batch_equals_its_sentences_one_at_a_time(model, settings):
    batch = search(model, SOURCES, settings, n_best=settings.beam_size)
    for i, found in enumerate(batch):
        length = int((SOURCES[i] != 0).sum())
        alone = search(model, SOURCES[i : i + 1, :length], settings, n_best=settings.beam_size)[0]
        assert [h.tokens for h in found] == [h.tokens for h in alone]
        assert [h.score for h in found] == pytest.approx([h.score for h in alone], abs=1e-4)


def test_train_mode_drops_out_in_the_step_as_in_forward():
    """Dropout is drawn in the step as in `forward`: the same masks in the same order, so with one seed the
    step over a whole prefix equals the forward pass, and it differs from eval mode."""
    model = make_model(dropout=0.3, attention_dropout=0.2, activation_dropout=0.2).train()
    tgt = torch.randint(3, 30, (3, 6), generator=torch.Generator().manual_seed(4))
    src_mask = padding_mask(SOURCES, 0)
    with torch.no_grad():
        memory = model.encode(SOURCES, src_mask)  # dropout drawn here too; the same memory for both below
        source = model.encode_for_decoding(SOURCES)
        cross = torch.stack([torch.stack(layer.cross_attn.project_kv(memory)) for layer in model.decoder_layers])
        source = dataclasses.replace(source, cross=cross)
        torch.manual_seed(5)
        stepped, _ = model.step(tgt, source.cache(6))
        torch.manual_seed(5)
        forward = model.decode(tgt, memory, memory_mask=src_mask)
        evaluated, _ = model.eval().step(tgt, source.cache(6))
    torch.testing.assert_close(stepped, forward, atol=1e-5, rtol=0)
    assert not torch.allclose(stepped, evaluated, atol=1e-3)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_one_attention_body_trains_encodes_and_decodes(monkeypatch, beam_size):
    """A breakpoint in the one attention body is hit by a search (the encoder without a cache, every decoder step
    on one) and by a training pass; a search binds each decoder layer once."""
    model = make_model()
    binds, calls = [], []
    bind, self_attention = DecoderLayer.bind, BoundAttention.self_attention
    monkeypatch.setattr(DecoderLayer, "bind", lambda self, *a, **k: binds.append(self) or bind(self, *a, **k))
    monkeypatch.setattr(
        BoundAttention,
        "self_attention",
        lambda self, x, cache=None, **k: calls.append(cache is not None) or self_attention(self, x, cache, **k),
    )
    search(model, SOURCES[:1], DecodeConfig(beam_size=beam_size, max_len=3, min_len=3))
    assert binds == list(model.decoder_layers)  # once per search
    assert calls == [False] * 2 + [True] * 3 * 3  # two encoder layers; three decoder layers, three steps
    calls.clear()
    model.train()(SOURCES, torch.ones(3, 4, dtype=torch.long)).sum().backward()
    assert calls == [False] * (2 + 3)  # teacher forcing: the same body over whole sequences


@torch.inference_mode()
def test_int8_models_step_like_their_forward_pass():
    """Activations are quantised per call with one scale per call: the step's one row and the forward pass's whole
    prefix round differently, so the logits are close (within the int8 error), not equal."""
    quantized = quantize_int8(make_model(d_model=32, n_heads=4), min_weights=0)  # every Linear, cross split
    tgt = torch.tensor([[1, 7, 8, 9, 10, 11]] * 3)
    cache = quantized.encode_for_decoding(SOURCES).cache(6)
    for t in range(tgt.size(1)):
        logits, _ = quantized.step(tgt[:, t : t + 1], cache)
        torch.testing.assert_close(logits[:, 0], quantized(SOURCES, tgt[:, : t + 1])[:, -1], atol=0.5, rtol=0)


@torch.inference_mode()
def test_float64_and_a_decoder_without_layers_take_the_same_path():
    model = make_model().double()
    cache = model.encode_for_decoding(SOURCES).cache(4)
    logits, _ = model.step(torch.tensor([[1], [1], [1]]), cache)
    assert logits.dtype == torch.float64 and cache.kv.dtype == torch.float64
    torch.testing.assert_close(logits[:, 0], model(SOURCES, torch.ones(3, 1, dtype=torch.long))[:, 0])
    empty = make_model(n_decoder_layers=0)
    found = search(empty, SOURCES, DecodeConfig(beam_size=2, max_len=4))
    reference = empty(SOURCES, torch.ones(3, 1, dtype=torch.long))  # no layer: the same logits at every step
    assert all(len(hyps[0].tokens) <= 4 for hyps in found) and reference.shape == (3, 1, 30)
