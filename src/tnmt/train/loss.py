"""Label-smoothed cross-entropy (section 5.4, epsilon_ls = 0.1), fused with the output projection.

The one-hot target is replaced by (1 - eps) on the reference token plus eps spread uniformly over the
vocabulary: the model is discouraged from becoming over-confident, which "hurts perplexity ... but
improves accuracy and BLEU". Padding positions contribute nothing. The loss is summed, and the loop
divides by the number of target tokens of the whole (accumulated) update, so every token weighs the
same whatever the batch composition. Per position t with logits z_t and reference y:

    loss_t = -(1 - eps) log p_t[y] - eps / V * sum_v log p_t[v]
    d loss_t / d z_t = softmax(z_t) - (1 - eps) onehot(y) - eps / V

With N target positions and V words, the (N, V) logits are the largest tensors of a training step
(4k tokens x 8k words = 131 MB in fp32): written out, cast, normalised and turned into a gradient,
they took ~40% of a Multi30k step on a CPU, mostly in memory traffic. So the loss takes the decoder's
features and the output matrix instead of logits, and works through the positions a block at a time:
each block's logits (a few MB, cache-sized) become its loss and its gradient at once, and only the
(N, D) and (V, D) gradients are kept for the backward pass. The full logits never exist. The same
matrix products are done, in the same precision (`dtype`, as autocast would); the softmax is in fp32.
"""

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from tnmt.model import Transformer

BLOCK_BYTES = 4 << 20  # fp32 logits of one block of positions: about a core's L2 cache
GROUP_BYTES = 16 << 20  # gradient logits gathered for one (V, D) weight-gradient product


def label_smoothed_loss(
    features: Tensor,
    weight: Tensor,
    target: Tensor,
    *,
    epsilon: float,
    pad_id: int,
    bias: Tensor | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[Tensor, Tensor]:
    """Summed smoothed loss and summed plain NLL (for perplexity) over non-pad positions.

    Args:
        features: (B, T, D) decoder outputs, before the output projection
            (`Transformer(..., features_only=True)`).
        weight: (V, D) the output projection (logits = features @ weight.T + bias).
        target: (B, T) reference ids, `pad_id` where there is no token.
        bias: (V,) or None.
        dtype: the precision of the matrix products (bf16 under mixed precision); None: the features'.

    Returns:
        The smoothed loss (differentiable) and the NLL (detached), both fp32 scalars.
    """
    # Inside the autograd function grad mode is always off, and needs_input_grad ignores it: decide here.
    want_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (features, weight, bias))
    flat = features.flatten(0, 1), weight, bias, target.flatten()
    return _FusedSmoothedCrossEntropy.apply(*flat, epsilon, pad_id, dtype or features.dtype, want_grad)


def model_loss(
    model: Transformer, features: Tensor, target: Tensor, *, epsilon: float, dtype: torch.dtype | None = None
) -> tuple[Tensor, Tensor]:
    """`label_smoothed_loss` through `model`'s own output projection (its weight, bias and pad id), for
    features from `model(src, tgt_in, features_only=True)`."""
    weight, bias, pad_id = model.output.weight, model.logits_bias, model.config.pad_id
    return label_smoothed_loss(features, weight, target, bias=bias, epsilon=epsilon, pad_id=pad_id, dtype=dtype)


class _FusedSmoothedCrossEntropy(torch.autograd.Function):
    """(N, D) features, (V, D) weight, (V,) bias, (N,) targets -> (summed smoothed loss, summed NLL).

    The gradients are computed in the forward pass (the only time the logits exist) and scaled by the
    incoming gradient in backward. Without gradients wanted (validation) only the loss is computed.
    """

    @staticmethod
    def forward(ctx: FunctionCtx, features, weight, bias, target, epsilon: float, pad_id: int, dtype, want_grad: bool):
        (n_all, d), v = features.shape, weight.size(0)
        rows = (target != pad_id).nonzero().squeeze(1)  # (N,) the positions with a reference token
        n = len(rows)
        block = max(16, BLOCK_BYTES // (4 * v))
        group = max(block, GROUP_BYTES // (2 * v) // block * block)
        # Every product has one of a few fixed shapes: the positions are padded to whole blocks. oneDNN
        # caches a primitive per bf16 matmul shape, and one per odd remainder grew the process by ~1 MB a step.
        n_padded = -(-n // block) * block
        x = features.new_zeros(n_padded, d, dtype=dtype)  # (N', D)
        x[:n] = features.index_select(0, rows)
        y = target.new_zeros(n_padded)  # (N',) padding rows point at word 0 and are masked below
        y[:n] = target.index_select(0, rows)
        w = weight.to(dtype)  # (V, D)
        logits_buffer = x.new_empty(min(block, n_padded), v)  # (b, V) one block's product, in `dtype`
        grads = x.new_empty(min(group, n_padded), v) if want_grad else None  # (G, V) logit gradients
        grad_x = features.new_zeros(n_all, d, dtype=torch.float32) if want_grad else None
        grad_w = weight.new_zeros(v, d, dtype=torch.float32) if want_grad else None
        grad_b = weight.new_zeros(v, dtype=torch.float32) if want_grad and bias is not None else None
        loss, nll_sum = features.new_zeros((), dtype=torch.float32), features.new_zeros((), dtype=torch.float32)
        for g0 in range(0, n_padded, group):
            g1 = min(g0 + group, n_padded)
            for b0 in range(g0, g1, block):
                real = min(n - b0, block)  # rows of this block that are positions, not padding
                z = torch.mm(x[b0 : b0 + block], w.T, out=logits_buffer).float()  # (b, V) logits
                if bias is not None:
                    z += bias
                z -= z.amax(dim=1, keepdim=True)  # log p = z - log sum exp z, now with z <= 0
                gold, mean = z.gather(1, y[b0 : b0 + block, None]).squeeze(1), z.mean(dim=1)  # (b,), (b,)
                p = z.exp_()  # unnormalised probabilities, in place of z
                total = p.sum(dim=1)  # (b,)
                nll = (total.log() - gold)[:real]  # -log p[y]
                uniform = (total.log() - mean)[:real]  # -1/V sum_v log p[v]
                loss += ((1 - epsilon) * nll + epsilon * uniform).sum()
                nll_sum += nll.sum()
                if want_grad:
                    p.mul_(total.reciprocal()[:, None]).sub_(epsilon / v)  # softmax - eps / V
                    p.scatter_add_(1, y[b0 : b0 + block, None], p.new_full((block, 1), epsilon - 1))
                    p[real:] = 0
                    if grad_b is not None:
                        grad_b += p.sum(dim=0)
                    grads[b0 - g0 : b0 - g0 + block] = p
            if want_grad:
                g = grads[: g1 - g0]  # (G, V)
                grad_x[rows[g0:g1]] = (g @ w)[: min(n, g1) - g0].float()
                grad_w += g.T @ x[g0:g1]  # a product in `dtype`, accumulated in fp32
        ctx.save_for_backward(grad_x, grad_w, grad_b)
        ctx.dtypes = features.dtype, weight.dtype
        ctx.mark_non_differentiable(nll_sum)
        return loss, nll_sum

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_loss: Tensor, _grad_nll: Tensor):
        grad_x, grad_w, grad_b = ctx.saved_tensors
        features_dtype, weight_dtype = ctx.dtypes
        grad_x = (grad_x * grad_loss).to(features_dtype)
        grad_w = (grad_w * grad_loss).to(weight_dtype)
        grad_b = None if grad_b is None else (grad_b * grad_loss).to(weight_dtype)
        return grad_x, grad_w, grad_b, None, None, None, None, None
