import pytest
import torch
from torch import nn

from tnmt import ModelConfig, Transformer
from tnmt.blocks.masks import causal_mask

V = 23


def tiny(**overrides) -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=V,
        tgt_vocab_size=V,
        d_model=16,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=32,
        max_len=40,
        **{"tie_output": False, "dropout": 0.0, **overrides},
    )
    return Transformer(config).eval()


def batch():
    src = torch.tensor([[5, 6, 7, 8, 2, 0, 0], [9, 10, 11, 12, 13, 14, 2]])
    tgt = torch.tensor([[1, 15, 16, 17, 0], [1, 18, 19, 20, 21]])
    return src, tgt


def to_torch_transformer(model: Transformer) -> nn.Transformer:
    """A torch.nn.Transformer carrying our weights (our parameter names map one to one)."""
    c = model.config
    ref = nn.Transformer(
        c.d_model,
        c.n_heads,
        c.n_encoder_layers,
        c.n_decoder_layers,
        c.d_ff,
        dropout=0.0,
        batch_first=True,
        norm_first=c.norm_first,
        layer_norm_eps=c.layer_norm_eps,
    )
    if not c.norm_first:  # torch always adds final LayerNorms; the paper's post-norm has none
        ref.encoder.norm = None
        ref.decoder.norm = None
    pairs = []
    for ours, theirs in zip(model.encoder_layers, ref.encoder.layers, strict=True):
        pairs += [
            (ours.self_attn.in_proj.weight, theirs.self_attn.in_proj_weight),
            (ours.self_attn.in_proj.bias, theirs.self_attn.in_proj_bias),
            (ours.self_attn.out_proj, theirs.self_attn.out_proj),
            (ours.ffn.linear1, theirs.linear1),
            (ours.ffn.linear2, theirs.linear2),
            (ours.attn_block.norm, theirs.norm1),
            (ours.ffn_block.norm, theirs.norm2),
        ]
    for ours, theirs in zip(model.decoder_layers, ref.decoder.layers, strict=True):
        pairs += [
            (ours.self_attn.in_proj.weight, theirs.self_attn.in_proj_weight),
            (ours.self_attn.in_proj.bias, theirs.self_attn.in_proj_bias),
            (ours.self_attn.out_proj, theirs.self_attn.out_proj),
            (ours.cross_attn.in_proj.weight, theirs.multihead_attn.in_proj_weight),
            (ours.cross_attn.in_proj.bias, theirs.multihead_attn.in_proj_bias),
            (ours.cross_attn.out_proj, theirs.multihead_attn.out_proj),
            (ours.ffn.linear1, theirs.linear1),
            (ours.ffn.linear2, theirs.linear2),
            (ours.self_block.norm, theirs.norm1),
            (ours.cross_block.norm, theirs.norm2),
            (ours.ffn_block.norm, theirs.norm3),
        ]
    if c.norm_first:
        pairs += [(model.encoder_norm, ref.encoder.norm), (model.decoder_norm, ref.decoder.norm)]
    with torch.no_grad():
        for ours, theirs in pairs:
            if isinstance(ours, nn.Module):
                theirs.load_state_dict(ours.state_dict())
            else:
                theirs.copy_(ours)
    # train() with dropout 0 avoids the nested-tensor fast path, which zeroes padded positions.
    return ref.train()


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # torch's note on its own pre-norm fast path
@pytest.mark.parametrize("norm_first", [False, True])
def test_equals_torch_nn_transformer_with_the_same_weights(norm_first):
    model = tiny(norm_first=norm_first)
    ref = to_torch_transformer(model)
    src, tgt = batch()
    logits = model(src, tgt)
    src_x = model.positions(model.src_embed(src))
    tgt_x = model.positions(model.tgt_embed(tgt))
    tgt_pad = tgt == 0
    tgt_pad[:, 0] = False
    hidden = ref(
        src_x,
        tgt_x,
        tgt_mask=~causal_mask(5)[0, 0],
        src_key_padding_mask=src == 0,
        tgt_key_padding_mask=tgt_pad,
        memory_key_padding_mask=src == 0,
    )
    torch.testing.assert_close(logits, model.output(hidden), atol=1e-5, rtol=0)


def test_changing_a_target_token_changes_no_earlier_logits():
    model = tiny()
    src, tgt = batch()
    base = model(src, tgt)
    for j in range(1, tgt.size(1)):
        changed = tgt.clone()
        changed[:, j] = 3
        out = model(src, changed)
        torch.testing.assert_close(out[:, :j], base[:, :j], atol=1e-6, rtol=0)
        assert not torch.allclose(out[1, j], base[1, j])


@pytest.mark.parametrize("extra", [1, 4])
def test_appending_padding_leaves_real_positions_unchanged(extra):
    model = tiny()
    src, tgt = batch()
    base = model(src, tgt)
    pad = lambda x: torch.cat([x, torch.zeros(x.size(0), extra, dtype=torch.long)], dim=1)  # noqa: E731
    torch.testing.assert_close(model(pad(src), tgt), base, atol=1e-5, rtol=0)
    longer = model(src, pad(tgt))
    torch.testing.assert_close(longer[1, :5], base[1], atol=1e-5, rtol=0)
    torch.testing.assert_close(longer[0, :4], base[0, :4], atol=1e-5, rtol=0)


def test_too_long_input_names_max_len():
    model = tiny()
    with pytest.raises(ValueError, match="max_len=40"):
        model(torch.full((1, 41), 5), torch.full((1, 3), 5))


def test_base_parameter_count_matches_the_architecture():
    v, d, f, n = 37000, 512, 2048, 6
    attention = 4 * (d * d + d)
    ffn = d * f + f + f * d + d
    norm = 2 * d
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    expected = v * d + n * encoder_layer + n * decoder_layer  # one shared, tied embedding matrix
    model = Transformer(ModelConfig.base(src_vocab_size=v, tgt_vocab_size=v))
    assert sum(p.numel() for p in model.parameters()) == expected == 63_082_496


def test_tied_and_shared_embeddings_are_one_tensor():
    model = tiny(share_embeddings=True, tie_output=True)
    assert model.src_embed.weight is model.tgt_embed.weight is model.output.weight


@pytest.mark.parametrize(
    "options",
    [  # single options too: in a pair, one ignored option would hide behind the other
        dict(positional="learned"),
        dict(activation="swish", final_logits_bias=True),
        dict(positional_layout="concat", activation="gelu"),
        dict(activation="swish"),
        dict(activation="gelu"),
        dict(positional_layout="concat"),
        dict(final_logits_bias=True),
        dict(scale_embeddings=False),
        dict(norm_first=True),
    ],
)
def test_variants_run_and_are_causal(options):
    """Each variant is causal and changes the output of a default model carrying the same weights,
    so an option the model ignored would fail here."""
    model, default = tiny(**options), tiny()
    ours = model.state_dict()
    shared = {k: v for k, v in default.state_dict().items() if k in ours and ours[k].shape == v.shape}
    model.load_state_dict(shared, strict=False)
    if model.logits_bias is not None:  # zero at init (MarianMT's is loaded): give it values that show
        with torch.no_grad():
            model.logits_bias.normal_()
    src, tgt = batch()
    changed = tgt.clone()
    changed[:, 3] = 4
    torch.testing.assert_close(model(src, changed)[:, :3], model(src, tgt)[:, :3], atol=1e-6, rtol=0)
    assert not torch.allclose(model(src, tgt), default(src, tgt), atol=1e-3)


def test_attention_maps_are_distributions_and_causal():
    model = tiny()
    src, tgt = batch()
    logits, maps = model.attention_maps(src, tgt)
    torch.testing.assert_close(logits, model(src, tgt))
    assert len(maps.encoder) == len(maps.decoder_self) == len(maps.cross) == 2
    for w in maps.encoder + maps.decoder_self + maps.cross:
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    for w in maps.decoder_self:
        assert (w.triu(diagonal=1) == 0).all()
    assert (maps.cross[0][0, :, :, 5:] == 0).all()  # source padding is never attended


@pytest.mark.parametrize("layer", [0, 1])
def test_forward_can_return_one_layers_cross_attention_at_no_change_of_its_output(layer):
    model = tiny()
    src, tgt = batch()
    _, maps = model.attention_maps(src, tgt)
    features, weights = model(src, tgt, features_only=True, cross_attention_of=layer)
    torch.testing.assert_close(features, model(src, tgt, features_only=True))
    torch.testing.assert_close(weights, maps.cross[layer])  # (B, H, T, S)
    assert weights.requires_grad  # for a loss on it: train/loss.py `alignment_loss`


def test_overfits_a_reverse_task():
    """Learning to reverse random sequences needs attention to route by position: a real end-to-end check."""
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=16,
        tgt_vocab_size=16,
        d_model=64,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=128,
        dropout=0.0,
        max_len=16,
        share_embeddings=True,
        tie_output=True,
    )
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.98))
    data = torch.randint(3, 16, (256, 8))

    def make(x):
        tgt = x.flip(1)
        bos = torch.full((x.size(0), 1), config.bos_id)
        return x, torch.cat([bos, tgt], 1), torch.cat([tgt, torch.full_like(bos, config.eos_id)], 1)

    steps = 400
    for _ in range(steps):
        src, tgt_in, tgt_out = make(data[torch.randint(0, 256, (64,))])
        loss = nn.functional.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    src, tgt_in, tgt_out = make(data)
    accuracy = (model(src, tgt_in).argmax(-1) == tgt_out).float().mean().item()
    assert accuracy >= 0.99, f"token accuracy {accuracy:.3f} after {steps} steps"


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_activation_checkpointing_gives_the_same_gradients(dropout):
    """Recomputing each layer in backward (with the same dropout masks) changes memory, not the numbers."""
    src, tgt = batch()
    grads, calls = [], []
    for checkpointing in (False, True):
        model = tiny(dropout=dropout)
        model.train().activation_checkpointing = checkpointing
        runs: list[int] = []
        model.decoder_layers[1].register_forward_pre_hook(lambda *_, runs=runs: runs.append(1))
        torch.manual_seed(1)
        model(src, tgt).square().mean().backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
        calls.append(len(runs))
    assert calls == [1, 2]  # checkpointed: the layer ran again in backward
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-6, rtol=1e-5, msg=name)
