"""Dropout (section 5.4): residual dropout on every sub-layer output and on the embedding sums.

Semantically `torch.nn.Dropout`, drawn more cheaply on CPU. PyTorch decides each element with
`bernoulli_`, which costs several times more than the raw random bits: the 17 dropouts of a training
step of the small model took about 0.35 s of its 2 s on 2 cores (benchmarks/speed/train_speed.py), this
version about a third of that. Each element gets a 15-bit random integer and survives when it is
>= round(p * 2^15): the drop probability is p rounded to a multiple of 2^-15 (0.1 -> 0.100006), and
survivors are scaled by the inverse of the keep probability, so the expected output equals the input.
Other devices keep PyTorch's fused kernel.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_LEVELS = 2**15


class Dropout(nn.Module):
    """Zeroes each element with probability p while training and scales the rest by 1 / (1 - p)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        threshold = round(self.p * _LEVELS)
        keep = random_15_bits(x.shape) >= threshold  # P(keep) = 1 - threshold / 2^15
        return x * keep.to(x.dtype).mul_(_LEVELS / (_LEVELS - threshold))

    def extra_repr(self) -> str:
        return f"p={self.p}"


def random_15_bits(shape: torch.Size) -> Tensor:
    """Uniform int16 in [0, 2^15): four per 63-bit draw, a quarter of the calls into the serial generator."""
    n = math.prod(shape)
    words = torch.empty((n + 3) // 4, dtype=torch.int64).random_()  # uniform in [0, 2^63)
    return (words.view(torch.int16)[:n] & (_LEVELS - 1)).view(shape)  # 16-bit lanes, top bit cleared
