"""Label-smoothed cross-entropy (section 5.4, epsilon_ls = 0.1).

The one-hot target is replaced by (1 - eps) on the reference token plus eps spread uniformly over the
vocabulary: the model is discouraged from becoming over-confident, which "hurts perplexity ... but
improves accuracy and BLEU". Padding positions contribute nothing. The loss is summed, and the loop
divides by the number of target tokens of the whole (accumulated) update, so every token weighs the
same whatever the batch composition.
"""

import torch.nn.functional as F
from torch import Tensor


def label_smoothed_loss(
    logits: Tensor, target: Tensor, *, epsilon: float, pad_id: int
) -> tuple[Tensor, Tensor]:
    """Summed smoothed loss and summed plain NLL (for perplexity) over non-pad positions.

    Args:
        logits: (B, T, V) unnormalised scores.
        target: (B, T) reference ids, `pad_id` where there is no token.
    """
    flat_logits, flat_target = logits.flatten(0, 1).float(), target.flatten()  # (B*T, V), (B*T,)
    loss = F.cross_entropy(
        flat_logits, flat_target, ignore_index=pad_id, label_smoothing=epsilon, reduction="sum"
    )
    nll = F.cross_entropy(flat_logits, flat_target, ignore_index=pad_id, reduction="sum")
    return loss, nll.detach()
