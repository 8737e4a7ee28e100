"""Label-smoothed cross-entropy (section 5.4, epsilon_ls = 0.1).

The one-hot target is replaced by (1 - eps) on the reference token plus eps spread uniformly over the
vocabulary: the model is discouraged from becoming over-confident, which "hurts perplexity ... but
improves accuracy and BLEU". Padding positions contribute nothing. The loss is summed, and the loop
divides by the number of target tokens of the whole (accumulated) update, so every token weighs the
same whatever the batch composition.

With N target positions and V classes, the (N, V) log-probabilities are the largest tensor of a
training step (4k tokens x 8k words = 131 MB in fp32), and every pass over them costs as much as a
feed-forward layer on a CPU. So the loss is one autograd function with a hand-written gradient:
one log-softmax yields both the smoothed loss and the plain NLL, and the backward pass turns the saved
log-probabilities into the gradient in place, where two `F.cross_entropy` calls and autograd would
make about ten passes and five (N, V) allocations. Per position t with reference y:

    loss_t = -(1 - eps) log p_t[y] - eps / V * sum_v log p_t[v]
    d loss_t / d logits_t = softmax(logits_t) - (1 - eps) onehot(y) - eps / V
"""

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable


def label_smoothed_loss(logits: Tensor, target: Tensor, *, epsilon: float, pad_id: int) -> tuple[Tensor, Tensor]:
    """Summed smoothed loss and summed plain NLL (for perplexity) over non-pad positions.

    Args:
        logits: (B, T, V) unnormalised scores, any float dtype (computed in fp32).
        target: (B, T) reference ids, `pad_id` where there is no token.

    Returns:
        The smoothed loss (differentiable) and the NLL (detached), both fp32 scalars.
    """
    return _SmoothedCrossEntropy.apply(logits.flatten(0, 1), target.flatten(), epsilon, pad_id)


class _SmoothedCrossEntropy(torch.autograd.Function):
    """(N, V) logits and (N,) targets -> (summed smoothed loss, summed NLL), gradient in one pass."""

    @staticmethod
    def forward(ctx: FunctionCtx, logits: Tensor, target: Tensor, epsilon: float, pad_id: int):
        log_probs = logits.float().log_softmax(dim=-1)  # (N, V)
        real = target != pad_id  # (N,)
        target = target.masked_fill(~real, 0)  # any valid index; padded rows are zeroed below
        nll = -log_probs.gather(1, target[:, None]).squeeze(1) * real  # (N,)
        uniform = -log_probs.sum(dim=-1) / log_probs.size(1) * real  # (N,)
        loss = ((1 - epsilon) * nll + epsilon * uniform).sum()
        ctx.save_for_backward(log_probs, target, real)
        ctx.epsilon, ctx.logits_dtype = epsilon, logits.dtype
        nll = nll.sum()
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_loss: Tensor, _grad_nll: Tensor):
        # Reusing the saved buffer bumps its version, so a second backward (retain_graph) raises.
        log_probs, target, real = ctx.saved_tensors
        grad = log_probs.exp_().sub_(ctx.epsilon / log_probs.size(1))  # softmax - eps / V
        grad.scatter_add_(1, target[:, None], grad.new_full((grad.size(0), 1), ctx.epsilon - 1))
        grad.mul_((grad_loss * real)[:, None])  # chain rule; padding rows get no gradient
        return grad.to(ctx.logits_dtype), None, None, None
