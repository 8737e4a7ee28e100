"""Inside the model: every stage `look_inside` records is pinned against the model that computed it (the
lesson's positional formula, blocks/masks.py, a plain forward pass), and recording leaves that pass unchanged."""

import math
from dataclasses import replace

import pytest
import torch

from tnmt.blocks.attention import BoundAttention
from tnmt.blocks.masks import padding_mask, target_mask
from tnmt.config import ModelConfig
from tnmt.errors import UserError
from tnmt.model import Transformer
from tnmt.translate.door import ModelDoor
from tnmt.translate.prepared import Source
from tnmt.views.inside import TABLE_ROWS, inside, look_inside
from tnmt.views.inside_view import format_inside, inside_dict

BOS, EOS = 1, 2
SRC = torch.tensor([[5, 9, 7, 11, EOS]])  # (1, S)
FED = torch.tensor([[BOS, 8, 6, 12]])  # (1, T)


def model_of(**changes) -> Transformer:
    torch.manual_seed(0)
    settings = dict(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2, n_encoder_layers=2)
    config = ModelConfig(**{**settings, "n_decoder_layers": 2, "d_ff": 32, "max_len": 40, **changes})
    return Transformer(config).eval()


SOURCE = Source(SRC[0, :-1].tolist(), None, BOS)  # SRC less its EOS, starting the decoder from BOS
OUTPUT = FED[0, 1:].tolist()


def forward_of(model: Transformer, top_k: int = 3):
    """The pass over SRC and FED through a door of the model, as a translator's would run it."""
    return look_inside(ModelDoor(model, eos_id=EOS), SOURCE, OUTPUT, top_k=top_k)


def lesson_formula(pos: int, dim: int, d_model: int) -> float:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) (section 3.5)."""
    i = dim // 2
    angle = pos / 10000 ** (2 * i / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


def test_the_positional_table_is_the_lessons_formula_in_both_layouts():
    interleaved = forward_of(model_of()).table  # (P, D)
    assert interleaved.shape == (TABLE_ROWS, 16)
    for pos in (0, 1, 7, 31):
        expected = [lesson_formula(pos, dim, 16) for dim in range(16)]
        assert interleaved[pos].tolist() == pytest.approx(expected, abs=1e-6)
    concat = forward_of(model_of(positional_layout="concat")).table  # [sines | cosines], the same frequencies
    assert torch.equal(concat[:, :8], interleaved[:, 0::2]) and torch.equal(concat[:, 8:], interleaved[:, 1::2])
    learned = model_of(positional="learned")
    assert torch.equal(forward_of(learned).table, learned.positions.learned.weight[:TABLE_ROWS])


def test_the_embedding_stage_is_what_the_first_layers_read():
    model = model_of()
    found = forward_of(model)
    scale = math.sqrt(16)
    assert found.scale == scale
    for ids, side, embedding in ((SRC[0], found.source, model.src_embed), (FED[0], found.target, model.tgt_embed)):
        token = embedding.weight[ids].detach()
        position = model.positions.rows(0, len(ids))
        rms = lambda v: v.pow(2).mean(dim=-1).sqrt().tolist()  # noqa: E731
        assert side.token_rms == pytest.approx(rms(token), abs=1e-4)
        assert side.scaled_rms == pytest.approx(rms(token * scale), abs=1e-4)
        assert side.position_rms == pytest.approx(rms(position), abs=1e-4)
        assert side.sum_rms == pytest.approx(rms(token * scale + position), abs=1e-4)
    unscaled = forward_of(model_of(scale_embeddings=False))
    assert unscaled.scale == 1 and unscaled.source.scaled_rms == unscaled.source.token_rms


def test_the_masks_are_the_ones_blocks_masks_makes_as_applied():
    found = forward_of(model_of())
    assert torch.equal(found.source_mask, padding_mask(SRC, 0)[0, 0, 0])
    assert torch.equal(found.target_mask, target_mask(FED, 0)[0, 0])
    assert found.target_mask.tolist() == [[k <= q for k in range(4)] for q in range(4)]  # causal


def test_attention_is_the_models_and_every_row_sums_to_one():
    model = model_of()
    found = forward_of(model)
    _, maps = model.attention_maps(SRC, FED)
    for recorded, layers, shape in (
        (found.encoder_attention, maps.encoder, (2, 2, 5, 5)),
        (found.decoder_attention, maps.decoder_self, (2, 2, 4, 4)),
        (found.cross_attention, maps.cross, (2, 2, 4, 5)),
    ):
        assert recorded.shape == shape and torch.equal(recorded, torch.cat(layers))
        assert recorded.sum(dim=-1) == pytest.approx(torch.ones(shape[:-1]), abs=1e-5)
    assert found.decoder_attention.triu(diagonal=1).abs().sum() == 0  # nothing after a position is read


def test_the_softmax_top_k_is_a_plain_forward_pass_and_the_hooks_change_nothing():
    model = model_of()
    found = forward_of(model, top_k=4)
    with torch.no_grad():
        probs = model(SRC, FED).softmax(dim=-1)[0]  # (T, V)
    assert not model._forward_hooks and not model.decoder_layers[0].ffn_block._forward_pre_hooks  # removed
    values, tokens = probs.topk(4, dim=-1)
    next_ids = [*FED[0, 1:].tolist(), EOS]
    for t, prediction in enumerate(found.predictions):
        assert [token for token, _ in prediction.top] == tokens[t].tolist()
        assert [p for _, p in prediction.top] == pytest.approx(values[t].tolist(), abs=1e-6)
        assert (prediction.fed, prediction.next) == (FED[0, t].item(), next_ids[t])
        assert prediction.prob == pytest.approx(probs[t, next_ids[t]].item(), abs=1e-6)
        assert prediction.rank == 1 + int((probs[t] > probs[t, next_ids[t]]).sum())


@pytest.mark.parametrize("norm_first", [False, True])
def test_add_and_norm_chains_the_residual_stream_from_the_embeddings_to_the_output(norm_first):
    """Each block's `out` is the next one's `stream`, the first reads the embeddings, the last gives the stack's
    output; post-norm normalises stream + update into `out`, pre-norm normalises the stream for the sub-layer."""
    model = model_of(norm_first=norm_first)
    found = forward_of(model)
    for layers, first, names in (
        (found.encoder_layers, found.source.sum_rms, ["self-attention", "feed-forward"]),
        (found.decoder_layers, found.target.sum_rms, ["masked self-attention", "cross-attention", "feed-forward"]),
    ):
        blocks = [block for layer in layers for block in layer.sublayers]
        assert [block.name for block in blocks] == names * 2
        assert blocks[0].stream == pytest.approx(first, abs=1e-3)
        for before, after in zip(blocks, blocks[1:], strict=False):
            assert after.stream == before.out
        for block in blocks:
            assert block.norm_out == pytest.approx([1.0] * len(block.out), abs=1e-2)  # LayerNorm at init: rms 1
            assert (block.norm_in == block.stream) is norm_first
            assert (block.norm_out == block.out) is not norm_first
    with torch.no_grad():
        memory = model.encode(SRC)  # pre-norm ends the stack with its LayerNorm, which no block records
        features = model(SRC, FED, features_only=True)
    rms = lambda v: v[0].pow(2).mean(dim=-1).sqrt().tolist()  # noqa: E731
    if not norm_first:
        assert found.encoder_layers[-1].sublayers[-1].out == pytest.approx(rms(memory), abs=1e-4)
        assert found.decoder_layers[-1].sublayers[-1].out == pytest.approx(rms(features), abs=1e-4)


def test_the_feed_forward_units_are_the_hidden_layer_of_the_network():
    model = model_of()
    found = forward_of(model)
    for layer in found.encoder_layers + found.decoder_layers:
        assert layer.ffn.d_ff == 32 and len(layer.ffn.active) == len(layer.ffn.top)
        for active, top in zip(layer.ffn.active, layer.ffn.top, strict=True):
            assert 0 <= active <= 32 and len(top) == 5
            values = [value for _, value in top]
            assert values == sorted(values, reverse=True)
            assert (values[0] > 0) is (active > 0)  # ReLU: the most active unit is above 0 iff any is


def test_a_decoder_without_layers_is_looked_inside_too():
    found = forward_of(model_of(n_decoder_layers=0))
    assert found.decoder_layers == [] and found.cross_attention.numel() == 0
    assert torch.equal(found.target_mask, target_mask(FED, 0)[0, 0]) and len(found.predictions) == 4


def test_looking_inside_needs_eval_mode():
    model = model_of()
    door = ModelDoor(model, eos_id=EOS)
    model.train()  # after the door put it in eval mode: a model being trained
    with pytest.raises(ValueError, match="eval mode"):
        look_inside(door, SOURCE, OUTPUT, top_k=3)


def test_inside_a_translator_uses_its_translation_or_the_one_given(tiny_translator, caplog):
    text = "three hundred and twelve"
    found = inside(tiny_translator, text, top_k=2)
    assert (found.translation, found.given) == (tiny_translator.translate([text])[0], False)
    [prepared] = tiny_translator.prepare([text])
    source = prepared.source
    assert found.forward.source_ids == [*source.ids, tiny_translator.tokenizer.eos_id]
    assert found.source_pieces == [*source.pieces, "</s>"] and found.fed_pieces[0] == "<s>"
    given = inside(tiny_translator, text, translation="dodici")
    expected = [tiny_translator.tokenizer.bos_id, *tiny_translator.tokenizer.encode_target("dodici")]
    assert (given.translation, given.given, given.forward.fed_ids) == ("dodici", True, expected)
    assert given.forward.next_ids == [*expected[1:], tiny_translator.tokenizer.eos_id]
    with pytest.raises(UserError, match="top_k = 21: must be from 1 to 20"):
        inside(tiny_translator, text, top_k=21)
    with pytest.raises(UserError, match="empty"):
        inside(tiny_translator, " ")
    with caplog.at_level("WARNING", logger="tnmt"):
        long = inside(tiny_translator, text, translation="uno " * 40)  # cut to max_len positions, BOS included
    assert len(long.forward.fed_ids) == tiny_translator.model.config.max_len
    assert "exceed the model's max_len; feeding the first 15" in caplog.text


def test_the_json_and_the_summary_carry_every_stage(tiny_translator):
    found = inside(tiny_translator, "forty-two", replace(tiny_translator.decode, beam_size=1), top_k=3)
    piece = lambda i: tiny_translator.tokenizer.target_pieces([i])[0]  # noqa: E731
    answer = inside_dict(found, piece, config=tiny_translator.model.config, top_k=3)
    stages = ["text", "translation", "source", "target", "embedding", "masks", "attention", "layers", "output"]
    assert list(answer)[: len(stages)] == stages
    t, s = len(found.fed_pieces), len(found.source_pieces)
    assert len(answer["masks"]["causal"]) == t and len(answer["masks"]["source_padding"]) == s
    assert [len(p["top"]) for p in answer["output"]] == [3] * t
    assert answer["output"][-1]["next"] == "</s>" and answer["target"]["fed_pieces"][0] == "<s>"
    summary = format_inside(found, piece).split("\n")
    headings = [line.split(" ")[0] for line in summary if line[:1].isdigit()]
    assert headings == [f"{n}." for n in range(1, 10)]
    assert "   decoder causal: position i sees 0..i" in summary
    assert sum(line.strip().endswith("#" * t) for line in summary) == 1  # the causal grid's last row


def test_inspecting_a_text_with_a_url_and_an_emoji_shows_what_the_search_saw(tiny_translator):
    """The pass reads the text the search read (the URL and the emoji kept out), so each next token's probability
    is the one the search chose it with."""
    text = "three https://example.com/a hundred 🐶 and twelve"
    settings = replace(tiny_translator.decode, beam_size=1, max_len=8)
    found = inside(tiny_translator, text, settings, top_k=2)
    [prepared] = tiny_translator.prepare([text], None, settings)
    assert prepared.read == "three hundred and twelve"
    assert found.forward.source_ids == [*prepared.source.ids, tiny_translator.tokenizer.eos_id]
    searched = tiny_translator.translations([text], settings)[0]
    assert found.translation == searched.text and "🐶" in searched.text  # the kept spans are put back
    probs = [p.prob for p in found.forward.predictions][: len(searched.token_log_probs)]
    assert probs == pytest.approx([math.exp(x) for x in searched.token_log_probs], abs=1e-5)


def test_inspect_runs_the_one_attention_body_that_translates(tiny_translator, monkeypatch):
    calls = []
    cross_attention = BoundAttention.cross_attention
    monkeypatch.setattr(
        BoundAttention,
        "cross_attention",
        lambda self, x, cache=None, **k: calls.append(cache is not None) or cross_attention(self, x, cache, **k),
    )
    inside(tiny_translator, "forty-two", translation="quarantadue")
    assert calls == [True]  # the decoder's one layer, on a KV cache, as a search runs it
