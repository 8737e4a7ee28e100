import pytest
import torch
from torch import nn

from tnmt import ModelConfig, Transformer
from tnmt.config import DecodeConfig
from tnmt.decode import greedy_search
from tnmt.translate.quantize import quantize_int8


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=64,
        tgt_vocab_size=64,
        d_model=32,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        share_embeddings=True,
        tie_output=True,
    )
    return Transformer(config).eval()


def test_every_linear_is_quantized_cross_attention_split_into_q_and_kv_and_the_original_is_untouched(model):
    quantized = quantize_int8(model, min_weights=0)
    dynamic = torch.ao.nn.quantized.dynamic.Linear
    kinds = {name: type(m) for name, m in quantized.named_modules() if isinstance(m, nn.Linear | dynamic)}
    assert len(kinds) == 2 * 4 + 2 * 7 + 1  # encoder: in, out, 2 FFN; decoder: + cross q, kv, out; output
    assert all(kind is dynamic for kind in kinds.values())
    assert {name for name in kinds if "cross_attn" in name} == {
        f"decoder_layers.{i}.cross_attn.{p}" for i in range(2) for p in ("q_proj", "kv_proj", "out_proj")
    }
    assert all(type(m) is nn.Linear for name, m in model.named_modules() if name.endswith(("proj", "output")))
    assert model.output.weight is model.tgt_embed.weight  # still tied in the float model


def test_quantized_logits_stay_close_and_decoding_still_works(model):
    torch.manual_seed(1)
    src = torch.randint(3, 64, (4, 9))
    src[:, -1] = model.config.eos_id
    tgt = torch.randint(3, 64, (4, 7))
    tgt[:, 0] = model.config.bos_id
    quantized = quantize_int8(model, min_weights=0)
    with torch.no_grad():
        exact, approx = model(src, tgt), quantized(src, tgt)
    error = (approx - exact).abs().max() / exact.std()
    assert 0 < error < 0.25  # int8 changes the numbers, by little (BLEU on Multi30k: NOTEBOOK.md)
    outputs = greedy_search(quantized, src, DecodeConfig(max_len=6))
    assert len(outputs) == 4 and all(len(ids) <= 6 for ids in outputs)


def test_linear_layers_under_min_weights_stay_float_and_cross_attention_stays_stacked(model):
    quantized = quantize_int8(model, min_weights=3 * 32 * 32)  # only the (3D, D) self-attention in_proj
    dynamic = torch.ao.nn.quantized.dynamic.Linear
    assert {name for name, m in quantized.named_modules() if isinstance(m, dynamic)} == {
        f"{stack}_layers.{i}.self_attn.in_proj" for stack in ("encoder", "decoder") for i in range(2)
    }
    assert all(layer.cross_attn.q_proj is None for layer in quantized.decoder_layers)
    assert quantize_int8(model).state_dict().keys() == model.state_dict().keys()  # d_model 32: nothing to do
