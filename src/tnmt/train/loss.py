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
On a GPU the blocks are as large as memory allows instead (`LossBlocks`): there a block costs a dozen kernel
launches whatever its size, and cache-sized blocks of the paper's 37k vocabulary made ~900 blocks, ~13k
launches, of a 25k-token update (issue 55). Given the batch's token count (known on the host), the loss reads
nothing back from the device, so the host can queue the backward pass while the GPU still runs the forward.

Guided alignment (Garg et al., 2019, "Jointly Learning to Align and Translate with Transformer Models";
Marian's `--guided-alignment`) adds, weighted, the cross-entropy between one cross-attention head and the
training corpus's word alignments (`alignment_loss`):
the head learns to point at the source words of the word being written, so alignments read from it
(translate/evidence.py) follow the statistical aligner instead of whatever the heads happened to learn.
"""

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from tnmt.model import Transformer


@dataclass(frozen=True)
class LossBlocks:
    """How many positions the loss works through at once, as bytes of their logits."""

    block_bytes: int  # fp32 logits of one block of positions
    group_bytes: int  # gradient logits (in the matmul dtype) gathered for one (V, D) weight-gradient product


CPU_BLOCKS = LossBlocks(block_bytes=4 << 20, group_bytes=16 << 20)  # about a core's L2 cache
GPU_BLOCKS = LossBlocks(block_bytes=512 << 20, group_bytes=1 << 30)  # 25k positions x 37k words: 7 blocks, 2 groups


def blocks_for(device: torch.device) -> LossBlocks:
    """The loss's blocks on `device`: cache-sized on a CPU, memory-sized on a GPU (module docstring)."""
    return GPU_BLOCKS if device.type == "cuda" else CPU_BLOCKS


GUIDED_HEAD = 0  # the index of the cross-attention head guided alignment trains (head 1): heads are interchangeable
MIN_PROBABILITY = 1e-9  # attention below this counts as this in the alignment loss: log 0 would be -inf


def label_smoothed_loss(
    features: Tensor,
    weight: Tensor,
    target: Tensor,
    *,
    epsilon: float,
    pad_id: int,
    bias: Tensor | None = None,
    dtype: torch.dtype | None = None,
    rdrop_alpha: float = 0.0,
    n_tokens: int | None = None,
    blocks: LossBlocks | None = None,
) -> tuple[Tensor, Tensor]:
    """Summed smoothed loss and summed plain NLL (for perplexity) over non-pad positions.

    Args:
        features: (B, T, D) decoder outputs, before the output projection
            (`Transformer(..., features_only=True)`); with `rdrop_alpha`, (2B, T, D): the same batch passed
            twice, the first B rows one pass and the last B the other (independent dropout masks).
        weight: (V, D) the output projection (logits = features @ weight.T + bias).
        target: (B, T) reference ids, `pad_id` where there is no token.
        bias: (V,) or None.
        dtype: the precision of the matrix products (bf16 under mixed precision); None: the features'.
        rdrop_alpha: R-Drop (Liang et al., 2021): 0 = off; else per position the loss is
            (CE_1 + CE_2 + alpha * (KL(p_1 || p_2) + KL(p_2 || p_1)) / 2) / 2, the two passes' smoothed
            losses plus the paper's consistency term, halved so a token weighs as much as without it.
        n_tokens: the non-pad positions of `target` (`Batch.n_tgt_tokens`); None: counted, which waits for
            the device.
        blocks: None: `blocks_for` the features' device.

    Returns:
        The loss (differentiable) and the NLL (detached, the passes' mean), both fp32 scalars.
    """
    # Inside the autograd function grad mode is always off, and needs_input_grad ignores it: decide here.
    want_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (features, weight, bias))
    passes = 2 if rdrop_alpha else 1
    rows, expected = features.size(0), passes * target.size(0)
    if rows != expected:
        raise ValueError(f"features have {rows} rows for {len(target)} target rows: {passes} pass(es) need {expected}")
    flat = features.flatten(0, 1), weight, bias, target.flatten()
    dtype = dtype or features.dtype
    n_tokens = int((target != pad_id).sum()) if n_tokens is None else n_tokens
    sizes = blocks or blocks_for(features.device)
    settings = epsilon, rdrop_alpha, pad_id, n_tokens, sizes, dtype, want_grad
    return _FusedSmoothedCrossEntropy.apply(*flat, *settings)


def model_loss(
    model: Transformer,
    features: Tensor,
    target: Tensor,
    *,
    epsilon: float,
    dtype: torch.dtype | None = None,
    rdrop_alpha: float = 0.0,
    n_tokens: int | None = None,
    blocks: LossBlocks | None = None,
) -> tuple[Tensor, Tensor]:
    """`label_smoothed_loss` through `model`'s own output projection (its weight, bias and pad id), for
    features from `model(src, tgt_in, features_only=True)`."""
    weight, bias, pad_id = model.output.weight, model.logits_bias, model.config.pad_id
    return label_smoothed_loss(
        features,
        weight,
        target,
        bias=bias,
        epsilon=epsilon,
        pad_id=pad_id,
        dtype=dtype,
        rdrop_alpha=rdrop_alpha,
        n_tokens=n_tokens,
        blocks=blocks,
    )


def alignment_loss(attention: Tensor, alignment: Tensor) -> tuple[Tensor, Tensor]:
    """Guided alignment's cross-entropy -sum_s q[t, s] log p[t, s], summed over the target tokens with a
    link, and the number of those tokens.

    Args:
        attention: (B, T, S) one head's cross-attention p, each row a distribution over the source.
        alignment: (B, T, S) q, rows that sum to 1 where the target token has links and to 0 where it has
            none (`Batch.alignment`): those rows add nothing. For a row, the loss is smallest, the entropy
            of q, where p = q.

    Returns:
        The summed loss (differentiable, fp32) and the count of rows with links, both scalars.
    """
    log_p = attention.float().clamp_min(MIN_PROBABILITY).log()  # (B, T, S)
    return -(alignment * log_p).sum(), (alignment.sum(dim=2) > 0).sum()


class _FusedSmoothedCrossEntropy(torch.autograd.Function):
    """(P*N, D) features of P passes, (V, D) weight, (V,) bias, (N,) targets -> (loss, NLL), P = 1 or 2.

    The gradients are computed in the forward pass (the only time the logits exist) and scaled by the
    incoming gradient in backward. Without gradients wanted (validation) only the loss is computed. A
    position's P passes sit side by side ((N', P, D)), so one product gives a block's logits for both.
    """

    @staticmethod
    def forward(
        ctx: FunctionCtx,
        features,
        weight,
        bias,
        target,
        epsilon: float,
        alpha: float,
        pad_id: int,
        n: int,
        sizes: LossBlocks,
        dtype,
        want_grad,
    ):
        n_all, (_, d), v = target.numel(), features.shape, weight.size(0)
        passes = features.size(0) // n_all
        # (N,) the positions with a reference token, in order: a stable sort puts them first (nonzero() would
        # wait for the device to learn N, which the caller knows)
        rows = torch.sort((target == pad_id).to(torch.uint8), stable=True).indices[:n]
        # no larger than the positions there are (to a multiple of 256: a GPU block would dwarf a small batch)
        block = max(16, min(sizes.block_bytes // (4 * v * passes), -(-n // 256) * 256))
        group = max(block, sizes.group_bytes // (2 * v * passes) // block * block)
        # Every product has one of a few fixed shapes: the positions are padded to whole blocks. oneDNN
        # caches a primitive per bf16 matmul shape, and one per odd remainder grew the process by ~1 MB a step.
        n_padded = -(-n // block) * block
        x = features.new_zeros(n_padded, passes, d, dtype=dtype)  # (N', P, D)
        x[:n] = features.view(passes, n_all, d)[:, rows].transpose(0, 1)
        y = target.new_zeros(n_padded)  # (N',) padding rows point at word 0 and are masked below
        y[:n] = target.index_select(0, rows)
        w = weight.to(dtype)  # (V, D)
        logits_buffer = x.new_empty(min(block, n_padded) * passes, v)  # (b*P, V) one block's product, in `dtype`
        grads = x.new_empty(min(group, n_padded), passes, v) if want_grad else None  # (G, P, V) logit gradients
        grad_x = features.new_zeros(passes, n_all, d, dtype=torch.float32) if want_grad else None
        grad_w = weight.new_zeros(v, d, dtype=torch.float32) if want_grad else None
        grad_b = weight.new_zeros(v, dtype=torch.float32) if want_grad and bias is not None else None
        loss, nll_sum = features.new_zeros((), dtype=torch.float32), features.new_zeros((), dtype=torch.float32)
        for g0 in range(0, n_padded, group):
            g1 = min(g0 + group, n_padded)
            for b0 in range(g0, g1, block):
                real = min(n - b0, block)  # rows of this block that are positions, not padding
                x_block = x[b0 : b0 + block].flatten(0, 1)  # (b*P, D)
                z = torch.mm(x_block, w.T, out=logits_buffer).float().view(-1, passes, v)  # (b, P, V) logits
                if bias is not None:
                    z += bias
                gold_ids = y[b0 : b0 + block, None, None].expand(-1, passes, 1)  # (b, P, 1)
                block_loss, block_nll, p = _block(z, gold_ids, real, epsilon=epsilon, alpha=alpha, want_grad=want_grad)
                loss += block_loss
                nll_sum += block_nll
                if want_grad:
                    if grad_b is not None:
                        grad_b += p.sum(dim=(0, 1))
                    grads[b0 - g0 : b0 - g0 + block] = p
            if want_grad:
                g = grads[: g1 - g0].flatten(0, 1)  # (G*P, V)
                m = min(n, g1) - g0  # the group's real positions
                grad_x[:, rows[g0:g1]] = (g @ w).view(-1, passes, d)[:m].transpose(0, 1).float()
                grad_w += g.T @ x[g0:g1].flatten(0, 1)  # a product in `dtype`, accumulated in fp32
        grad_x = grad_x.view(passes * n_all, d) if want_grad else None
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
        return grad_x, grad_w, grad_b, *[None] * 8


def _block(
    z: Tensor, gold_ids: Tensor, real: int, *, epsilon: float, alpha: float, want_grad: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """One block of positions: its smoothed loss and NLL, summed over the `real` positions (the rows after
    them are padding) and averaged over the P passes, and, when wanted, the loss's gradient w.r.t. the
    logits, written over z (the block's largest tensor, so no second one is allocated).

    z: (b, P, V) fp32 logits (bias added); gold_ids: (b, P, 1) the reference tokens. Returns the loss,
    the NLL and z's storage: the gradient (padding rows zero) if wanted, else the unnormalised probabilities.
    """
    passes, v = z.size(1), z.size(2)
    z -= z.amax(dim=2, keepdim=True)  # log p = z - log sum exp z, now with z <= 0
    gold, mean = z.gather(2, gold_ids).squeeze(2), z.mean(dim=2)  # (b, P), (b, P)
    log_ratio = z[:, 0] - z[:, 1] if alpha else None  # (b, V) log p_1 - log p_2, but for a constant
    p = z.exp_()  # unnormalised probabilities, in place of z
    total = p.sum(dim=2)  # (b, P)
    nll = (total.log() - gold)[:real]  # (r, P) -log p[y]
    uniform = (total.log() - mean)[:real]  # (r, P) -1/V sum_v log p[v]
    loss = ((1 - epsilon) * nll + epsilon * uniform).sum() / passes
    if alpha or want_grad:
        p.mul_(total.reciprocal()[:, :, None])  # (b, P, V) softmax
    if alpha:
        log_ratio -= (total[:, 0].log() - total[:, 1].log())[:, None]
        kl, kl_grad = _consistency(p, log_ratio, real, want_grad)
        loss = loss + alpha / 2 * kl
    if want_grad:
        p.sub_(epsilon / v).scatter_add_(2, gold_ids, p.new_full(gold_ids.shape, epsilon - 1))
        if alpha:  # d/dz of the halved loss: (grad CE_i + alpha * grad of the symmetric KL) / 2
            p.add_(kl_grad, alpha=alpha).mul_(0.5)
        p[real:] = 0
    return loss, nll.sum() / passes, p


def _consistency(p: Tensor, log_ratio: Tensor, real: int, want_grad: bool) -> tuple[Tensor, Tensor | None]:
    """R-Drop's symmetric KL for one block of softmaxes p (b, 2, V): its sum over the `real` positions, and
    its gradient w.r.t. both passes' logits (b, 2, V) if wanted.

    With r = log p_1 - log p_2: KL(p_1 || p_2) = sum p_1 r and KL(p_2 || p_1) = -sum p_2 r, and
    d [KL_12 + KL_21] / d z_1 = p_1 (r - KL_12) + p_1 - p_2 (the first term through p_1, the second is a
    cross-entropy of z_1 against p_2); z_2's is the same with the passes swapped. Both halved: the average.
    """
    p1, p2 = p[:, 0], p[:, 1]  # (b, V)
    kl_12, kl_21 = (p1 * log_ratio).sum(dim=1), -(p2 * log_ratio).sum(dim=1)  # (b,)
    kl = ((kl_12 + kl_21)[:real] / 2).sum()
    if not want_grad:
        return kl, None
    grad = torch.empty_like(p)  # (b, 2, V), written in place: these blocks are the loss's largest tensors
    torch.sub(log_ratio, kl_12[:, None], out=grad[:, 0]).mul_(p1).add_(p1).sub_(p2).mul_(0.5)
    torch.add(log_ratio, kl_21[:, None], out=grad[:, 1]).mul_(p2).sub_(p2).add_(p1).mul_(-0.5)
    return kl, grad
