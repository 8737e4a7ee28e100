"""The k best scores of each row, found faster than `torch.topk` on CPU: the selection both searches make at
every step."""

import torch
from torch import Tensor


def top_k(scores: Tensor, k: int, *, block: int = 64) -> tuple[Tensor, Tensor]:
    """`scores.topk(k, dim=1)` for (N, L) scores, sorted, found through block maxima.

    Why: on CPU `topk` and `argmax` over a row are not vectorised (about 3 ns per score: 2 ms for the
    64 x 8000 logits of a batch-64 greedy step or the 16 x 32000 of a beam-4 step, a sixth of the
    step), while `amax` is (about 20x faster). The k best scores lie in the k blocks of `block` scores
    with the highest maxima, so an `amax` over all blocks leaves only k * block candidates to rank.
    Small inputs, where the extra calls cost more than they save, go straight to `topk`.
    """
    n, length = scores.shape
    main = length - length % block
    n_blocks = main // block
    if n * length < 16384 or n_blocks <= k:
        # greedy search's argmax: `max` finds it in half the time of `topk` (22 against 11 us for 1 x 8000)
        return tuple(scores.max(dim=1, keepdim=True)) if k == 1 else scores.topk(k, dim=1)
    blocks = scores[:, :main].unflatten(1, (n_blocks, block))  # (N, L // block, block), a view
    best = blocks.amax(dim=2).topk(k, dim=1).indices  # (N, k) the blocks holding the k best
    rows = torch.arange(n, device=scores.device)[:, None]  # (N, 1)
    candidates = blocks[rows, best].flatten(1)  # (N, k, block) -> (N, k * block)
    offsets = torch.arange(block, device=scores.device)
    index = (best[:, :, None] * block + offsets).flatten(1)  # (N, k, block) -> (N, k * block)
    if main < length:  # the last L % block scores are candidates too
        tail = torch.arange(main, length, device=scores.device).expand(n, -1)  # (N, L - main)
        candidates = torch.cat([candidates, scores[:, main:]], dim=1)
        index = torch.cat([index, tail], dim=1)
    values, picked = candidates.topk(k, dim=1)  # (N, k)
    return values, index.gather(1, picked)
