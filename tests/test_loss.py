import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import tnmt.train.loss as loss_module
from tnmt import ModelConfig, Transformer
from tnmt.aligning_head import alignment_layer_index
from tnmt.train.loss import GPU_BLOCKS, GUIDED_HEAD, LossBlocks, alignment_loss, label_smoothed_loss, model_loss


class Ops(TorchDispatchMode):
    """Records every aten op run inside it, with the shapes of its first two arguments."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append((func, tuple(tuple(a.shape) for a in args[:2] if isinstance(a, torch.Tensor))))
        return func(*args, **(kwargs or {}))


def as_logits(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Features and an identity output matrix whose product is `logits` (B, T, V)."""
    return logits, torch.eye(logits.size(-1))


def test_matches_a_hand_computation_and_ignores_padding():
    logits = torch.tensor([[[2.0, 0.0, 1.0], [0.5, 0.5, 3.0]]])  # (B=1, T=2, V=3)
    target = torch.tensor([[0, 1]])  # second position is padding (pad_id=1)
    eps = 0.1
    logp = torch.log_softmax(logits[0, 0], -1).tolist()
    # (1 - eps) on the reference token, eps spread uniformly over all V classes.
    expected = -((1 - eps) * logp[0] + eps / 3 * sum(logp))
    loss, nll = label_smoothed_loss(*as_logits(logits), target, epsilon=eps, pad_id=1)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert nll.item() == pytest.approx(-logp[0], rel=1e-6)


def test_no_smoothing_is_plain_cross_entropy():
    logits = torch.randn(2, 3, 5)
    target = torch.randint(1, 5, (2, 3))
    loss, nll = label_smoothed_loss(*as_logits(logits), target, epsilon=0.0, pad_id=0)
    assert loss.item() == pytest.approx(nll.item())
    manual = -torch.log_softmax(logits, -1).gather(-1, target[..., None]).sum().item()
    assert loss.item() == pytest.approx(manual, rel=1e-5)


def test_smoothing_penalises_overconfidence():
    target = torch.tensor([[0]])
    confident = torch.tensor([[[20.0, 0.0, 0.0, 0.0]]])
    calibrated = torch.tensor([[[math.log(0.9 / (0.1 / 3)), 0.0, 0.0, 0.0]]])
    smoothed = lambda x: label_smoothed_loss(*as_logits(x), target, epsilon=0.1, pad_id=3)[0].item()  # noqa: E731
    assert smoothed(calibrated) < smoothed(confident)


def reference(features, weight, bias, target, *, dtype):
    """The unfused computation: logits in `dtype` (as autocast makes them), F.cross_entropy in fp32."""
    logits = features.to(dtype) @ weight.to(dtype).T
    logits = logits.float() + (0 if bias is None else bias)
    flat = logits.flatten(0, 1), target.flatten()
    loss = F.cross_entropy(*flat, ignore_index=0, label_smoothing=0.1, reduction="sum")
    return loss, F.cross_entropy(*flat, ignore_index=0, reduction="sum").detach()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("blocks", ["one", "many"])
def test_loss_and_gradients_match_the_unfused_computation(dtype, with_bias, blocks, monkeypatch):
    if blocks == "many":  # blocks of 16 positions, gathered in groups of 32: uneven ends of both
        monkeypatch.setattr(loss_module, "CPU_BLOCKS", LossBlocks(block_bytes=16 * 4 * 50, group_bytes=32 * 2 * 50))
    torch.manual_seed(0)
    features = torch.randn(4, 21, 8, requires_grad=True)  # (B, T, D)
    weight = torch.randn(50, 8, requires_grad=True)  # (V, D)
    bias = torch.randn(50, requires_grad=True) if with_bias else None
    target = torch.randint(1, 50, (4, 21))
    target[0, 5:] = 0  # padding
    target[2, 17:] = 0
    loss, nll = label_smoothed_loss(features, weight, target, epsilon=0.1, pad_id=0, bias=bias, dtype=dtype)
    (2.0 * loss).backward()
    leaves = [features, weight] + ([bias] if with_bias else [])
    fused_grads = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    expected, expected_nll = reference(features, weight, bias, target, dtype=dtype)
    (2.0 * expected).backward()
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(nll, expected_nll, rtol=1e-5, atol=1e-4)
    assert not nll.requires_grad
    for fused, t in zip(fused_grads, leaves, strict=True):
        assert fused.dtype == t.dtype
        torch.testing.assert_close(fused, t.grad, **tolerance)
    assert (fused_grads[0][0, 5:] == 0).all()  # padded positions get no gradient


def test_without_gradients_only_the_loss_is_computed():
    """Validation: no_grad with parameters that require gradients (the model's)."""
    features, weight = torch.randn(2, 3, 4), torch.randn(6, 4, requires_grad=True)
    target = torch.tensor([[1, 2, 0], [3, 0, 0]])
    with torch.no_grad(), Ops() as ops:
        loss, nll = label_smoothed_loss(features, weight, target, epsilon=0.1, pad_id=0)
    expected, expected_nll = reference(features, weight, None, target, dtype=torch.float32)
    torch.testing.assert_close((loss, nll), (expected, expected_nll))
    assert not loss.requires_grad
    ran = {func for func, _ in ops.calls}
    assert torch.ops.aten.mm.out in ran  # the logits of the one block
    assert torch.ops.aten.scatter_add_.default not in ran and torch.ops.aten.mm.default not in ran  # no gradients


def test_all_padding_gives_zero_loss_and_zero_gradients():
    features = torch.randn(2, 3, 4, requires_grad=True)
    weight = torch.randn(6, 4, requires_grad=True)
    loss, nll = label_smoothed_loss(features, weight, torch.zeros(2, 3, dtype=torch.long), epsilon=0.1, pad_id=0)
    loss.backward()
    assert loss.item() == nll.item() == 0.0
    assert (features.grad == 0).all() and (weight.grad == 0).all()


def test_tied_weights_collect_both_gradients():
    """The output matrix is also the embedding: both uses add up in one .grad (the model's tying)."""
    torch.manual_seed(1)
    embedding = torch.randn(10, 4, requires_grad=True)
    ids, target = torch.tensor([[1, 2, 3]]), torch.tensor([[2, 3, 4]])
    loss, _ = label_smoothed_loss(embedding[ids].tanh(), embedding, target, epsilon=0.1, pad_id=0)
    loss.backward()
    fused = embedding.grad.clone()
    embedding.grad = None
    reference(embedding[ids].tanh(), embedding, None, target, dtype=torch.float32)[0].backward()
    torch.testing.assert_close(fused, embedding.grad)


def test_products_have_a_few_fixed_shapes_whatever_the_batch(monkeypatch):
    """oneDNN caches one primitive per bf16 matmul shape: remainders of every size grew a training process
    by ~1 MB a step, so the positions are padded to whole blocks (block 16, groups of 64 positions here)."""
    monkeypatch.setattr(loss_module, "CPU_BLOCKS", LossBlocks(block_bytes=16 * 4 * 50, group_bytes=64 * 2 * 50))
    weight = torch.randn(50, 8, requires_grad=True)
    with Ops() as ops:
        for positions in range(1, 200, 7):
            features = torch.randn(1, positions, 8, requires_grad=True)
            target = torch.randint(1, 50, (1, positions))
            loss, _ = label_smoothed_loss(features, weight, target, epsilon=0.1, pad_id=0, dtype=torch.bfloat16)
            loss.backward()
    shapes = {shapes for func, shapes in ops.calls if func in (torch.ops.aten.mm.default, torch.ops.aten.mm.out)}
    # one block product, and per group size (16, 32, 48, 64 positions) the two gradient products
    assert len(shapes) <= 1 + 2 * 4


def test_model_loss_uses_the_models_projection_bias_and_padding():
    torch.manual_seed(2)
    config = ModelConfig(
        src_vocab_size=30,
        tgt_vocab_size=30,
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_encoder_layers=1,
        n_decoder_layers=1,
        dropout=0.0,
        final_logits_bias=True,
        tie_output=False,
        share_embeddings=False,
    )
    model = Transformer(config)
    torch.nn.init.normal_(model.logits_bias)
    src, tgt_in = torch.randint(3, 30, (2, 5)), torch.randint(3, 30, (2, 4))
    target = torch.randint(3, 30, (2, 4))
    target[1, 2:] = config.pad_id
    features = model(src, tgt_in, features_only=True)
    loss, nll = model_loss(model, features, target, epsilon=0.1)
    flat = model(src, tgt_in).flatten(0, 1), target.flatten()
    expected = F.cross_entropy(*flat, ignore_index=config.pad_id, label_smoothing=0.1, reduction="sum")
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-4)


def rdrop_reference(features, weight, target, *, alpha):
    """R-Drop written out with autograd: (CE_1 + CE_2 + alpha * (KL_12 + KL_21) / 2) / 2 per position."""
    half = target.size(0)
    ce = [reference(f, weight, None, target, dtype=torch.float32) for f in (features[:half], features[half:])]
    mask = (target != 0).flatten()
    logp_1, logp_2 = (torch.log_softmax((f @ weight.T).flatten(0, 1)[mask], -1) for f in features.split(half))
    kl_12 = F.kl_div(logp_2, logp_1, log_target=True, reduction="sum")  # KL(p_1 || p_2)
    kl_21 = F.kl_div(logp_1, logp_2, log_target=True, reduction="sum")
    loss = (ce[0][0] + ce[1][0] + alpha * (kl_12 + kl_21) / 2) / 2
    return loss, (ce[0][1] + ce[1][1]) / 2


@pytest.mark.parametrize("blocks", ["one", "many"])
def test_rdrop_loss_and_gradients_match_autograd(blocks, monkeypatch):
    if blocks == "many":
        small = LossBlocks(block_bytes=16 * 4 * 50 * 2, group_bytes=32 * 2 * 50 * 2)
        monkeypatch.setattr(loss_module, "CPU_BLOCKS", small)
    torch.manual_seed(3)
    features = torch.randn(6, 21, 8, requires_grad=True)  # (2B, T, D): two passes over B=3 sentences
    weight = torch.randn(50, 8, requires_grad=True)
    target = torch.randint(1, 50, (3, 21))
    target[0, 5:] = 0
    target[2, 13:] = 0
    loss, nll = label_smoothed_loss(features, weight, target, epsilon=0.1, pad_id=0, rdrop_alpha=5.0)
    (3.0 * loss).backward()
    fused_grads = features.grad.clone(), weight.grad.clone()
    features.grad = weight.grad = None
    expected, expected_nll = rdrop_reference(features, weight, target, alpha=5.0)
    (3.0 * expected).backward()
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(nll, expected_nll, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(fused_grads, (features.grad, weight.grad), rtol=1e-5, atol=1e-5)
    assert (fused_grads[0][0, 5:] == 0).all() and (fused_grads[0][3, 5:] == 0).all()  # padding, both passes


def test_rdrop_of_identical_passes_is_the_plain_loss():
    """No dropout, two equal passes: the KL term and its gradient vanish, the loss is the one-pass loss."""
    torch.manual_seed(4)
    features, weight = torch.randn(2, 7, 8), torch.randn(30, 8)
    target = torch.randint(1, 30, (2, 7))
    plain = label_smoothed_loss(features, weight, target, epsilon=0.1, pad_id=0)
    twice = label_smoothed_loss(torch.cat([features, features]), weight, target, epsilon=0.1, pad_id=0, rdrop_alpha=5.0)
    torch.testing.assert_close(twice, plain)


def test_rdrop_needs_two_passes_of_features():
    features, weight, target = torch.randn(2, 3, 4), torch.randn(6, 4), torch.ones(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="2 rows for 2 target rows: 2 pass.es. need 4"):
        label_smoothed_loss(features, weight, target, epsilon=0.1, pad_id=0, rdrop_alpha=1.0)


# --- guided alignment ---

ALIGNMENT = torch.tensor(
    [
        [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]],  # target 0: two links; 1: one; 2: none (EOS)
        [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],  # target 0: one link; the rest: no link, padding
    ]
)  # (B, T, S)


def distributions(logits: torch.Tensor) -> torch.Tensor:
    return logits.softmax(dim=-1)


def test_a_head_attending_where_the_alignment_says_has_the_smallest_loss():
    attention = ALIGNMENT.clone()
    attention[ALIGNMENT.sum(-1) == 0] = 1 / 3  # unaligned rows may attend anywhere: they do not count
    loss, aligned = alignment_loss(attention, ALIGNMENT)
    assert aligned.item() == 3
    torch.testing.assert_close(loss, torch.tensor(math.log(2)))  # the entropy of the alignment: 2 links, 1, 1
    torch.manual_seed(0)
    for _ in range(20):  # any other head costs more
        other = distributions(torch.randn(2, 3, 3) * 3)
        assert alignment_loss(other, ALIGNMENT)[0] > loss


def test_the_loss_is_the_hand_computed_cross_entropy_and_ignores_rows_without_links():
    attention = distributions(torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(1)))
    expected = -(0.5 * attention[0, 0, 0].log() + 0.5 * attention[0, 0, 1].log())
    expected = expected - attention[0, 1, 2].log() - attention[1, 0, 1].log()
    loss, _ = alignment_loss(attention, ALIGNMENT)
    torch.testing.assert_close(loss, expected)
    changed = attention.clone()
    changed[0, 2], changed[1, 1:] = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])
    torch.testing.assert_close(alignment_loss(changed, ALIGNMENT)[0], loss)


def test_attention_of_zero_on_a_link_gives_a_finite_loss_and_gradient():
    attention = torch.tensor([[[1.0, 0.0, 0.0]]], requires_grad=True)
    loss, _ = alignment_loss(attention, torch.tensor([[[0.0, 1.0, 0.0]]]))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(attention.grad).all()


def test_gradient_of_the_alignment_loss_reaches_only_the_guided_head_and_what_feeds_it():
    torch.manual_seed(3)
    config = ModelConfig(
        src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=3
    )
    model = Transformer(config).eval()
    src, tgt_in = torch.randint(3, 30, (2, 3)), torch.randint(3, 30, (2, 3))
    layer = alignment_layer_index(-2, config.n_decoder_layers)  # the penultimate: layer 2, index 1
    _, attention = model(src, tgt_in, features_only=True, cross_attention_of=layer)
    loss, _ = alignment_loss(attention[:, GUIDED_HEAD], ALIGNMENT)
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    above = [name for name in grads if name.startswith("decoder_layers.2.")]
    assert above and all(grads[name] is None for name in above)  # the layer above: not even in the graph
    guided = model.decoder_layers[layer].cross_attn
    d, dh = config.d_model, config.d_model // config.n_heads
    in_proj = guided.in_proj.weight.grad  # rows: [W_Q; W_K; W_V], each head's Dh rows side by side
    for rows in (slice(0, dh), slice(d, d + dh)):  # head 0's queries and keys
        assert in_proj[rows].abs().sum() > 0
    for rows in (slice(dh, d), slice(d + dh, 2 * d), slice(2 * d, 3 * d)):  # head 1's Q and K, every V
        assert not in_proj[rows].any()
    assert guided.out_proj.weight.grad is None  # the weights are the loss's input, not the layer's output
    assert model.decoder_layers[layer].ffn.linear1.weight.grad is None  # after cross-attention in the layer
    assert model.decoder_layers[0].self_attn.in_proj.weight.grad.abs().sum() > 0  # below: it makes the queries
    assert model.encoder_layers[0].ffn.linear1.weight.grad.abs().sum() > 0  # the encoder makes the keys


def test_the_gpus_memory_sized_blocks_give_the_cache_sized_ones_result(monkeypatch):
    """One block (GPU_BLOCKS) or many (the CPU's, made small here): the same loss and gradients, to fp32 rounding
    (in bf16 the weight gradient's products round per group; the unfused reference test covers bf16)."""
    monkeypatch.setattr(loss_module, "CPU_BLOCKS", LossBlocks(block_bytes=16 * 4 * 50, group_bytes=32 * 2 * 50))
    torch.manual_seed(0)
    features = torch.randn(4, 21, 8, requires_grad=True)  # (B, T, D)
    weight = torch.randn(50, 8, requires_grad=True)  # (V, D)
    target = torch.randint(1, 50, (4, 21))
    target[1, 9:] = 0
    results = []
    for blocks in (None, GPU_BLOCKS):  # None: the device's, the CPU's here
        loss, nll = label_smoothed_loss(features, weight, target, epsilon=0.1, pad_id=0, blocks=blocks)
        loss.backward()
        results.append((loss.detach(), nll, features.grad, weight.grad))
        features.grad = weight.grad = None
    torch.testing.assert_close(results[0], results[1], rtol=1e-5, atol=1e-4)


def test_given_the_token_count_the_loss_reads_nothing_back_from_the_device():
    """A GPU's host would wait there: no nonzero() (its size is data), no scalar read (`.item()`, `int()`)."""
    torch.manual_seed(0)
    features = torch.randn(3, 11, 8, requires_grad=True)
    weight = torch.randn(50, 8, requires_grad=True)
    target = torch.randint(1, 50, (3, 11))
    target[0, 4:] = 0
    n_tokens = int((target != 0).sum())
    with Ops() as ops:
        loss, nll = label_smoothed_loss(features, weight, target, epsilon=0.1, pad_id=0, n_tokens=n_tokens)
        loss.backward()
    reads = {torch.ops.aten.nonzero.default, torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default}
    assert not [func for func, _ in ops.calls if func in reads]
    expected, expected_nll = reference(features, weight, None, target, dtype=torch.float32)
    torch.testing.assert_close((loss, nll), (expected, expected_nll))
