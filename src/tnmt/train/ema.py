"""An exponential moving average (EMA) of the weights, for validation, checkpoints and translation.

Not in the paper. With a learning rate that is still high when the budget ends (a 45-minute CPU run is
far from converged), the weights of one update are a noisy sample around where training is heading; the
average of recent updates sits closer to it, as averaging the last checkpoints does (section 6.1), but
at every update and at no cost in checkpoints on disk (Polyak & Juditsky 1992; fairseq's `--ema-decay`).

    shadow <- decay_t * shadow + (1 - decay_t) * weights,   decay_t = min(decay, (1 + t) / (10 + t))

The warm-up of decay_t (TensorFlow's ExponentialMovingAverage with num_updates) keeps the first updates
from dragging the random initialisation along for thousands of steps. It also caps the horizon: the
average spans about (10 + t) / 9 updates until that reaches 1 / (1 - decay), so 0.999 is reached at update
~9000 (a 45-minute run of the Multi30k recipe averages over its last ~300-1000 updates), and a larger decay
changes nothing before update 9 * decay / (1 - decay). The shadow lives in fp32 beside
the parameters (one more copy of the weights); updating it is one fused pass over them.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


class WeightAverage:
    """The EMA of `model`'s parameters (tied ones once), started from their current values."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.params = list(model.parameters())
        self.shadow = [p.detach().clone() for p in self.params]

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Fold in the weights after update number `step` (1-based)."""
        decay = min(self.decay, (1 + step) / (10 + step))
        torch._foreach_lerp_(self.shadow, [p.detach() for p in self.params], 1.0 - decay)

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The model holds the averaged weights inside the block, its training weights again after it.

        Swaps storage instead of copying: tensors taken from the model before the block (e.g. a
        state_dict) keep the training weights.
        """
        self._swap()
        try:
            yield
        finally:
            self._swap()

    def _swap(self) -> None:
        for param, shadow in zip(self.params, self.shadow, strict=True):
            param.data, shadow.data = shadow.data, param.data
