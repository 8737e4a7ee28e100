"""Position-wise feed-forward network (Eq. 2, section 3.3).

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

The same two linear maps are applied at every position (a 1x1 convolution). ReLU is the paper's;
GELU and swish (SiLU) exist because pretrained MarianMT / OPUS-MT models use them.
"""

import torch.nn.functional as F
from torch import Tensor, nn

from tnmt.blocks.bound import Linear, LinearBinder, bind_linear
from tnmt.blocks.dropout import Dropout
from tnmt.blocks.record import Recorder

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}


class FeedForward(nn.Module):
    """(B, T, D) -> (B, T, F) -> activation -> (B, T, D)."""

    def __init__(self, d_model: int, d_ff: int, *, activation: str = "relu", dropout: float = 0.0) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]
        self.dropout = Dropout(dropout)  # on the hidden activations ("relu dropout"; 0 in the paper)

    def forward(self, x: Tensor) -> Tensor:
        return self.bind()(x)

    def bind(self, linear: LinearBinder = bind_linear, *, record: Recorder | None = None) -> Linear:
        """This network as a function of its own tensors, bound by `linear` (blocks/bound.py): what `forward` and
        a decoder step run. With `record`, it reports the hidden units' activations (blocks/record.py)."""
        linear1, linear2, activation = linear(self.linear1, None), linear(self.linear2, None), self.activation
        dropout = self.dropout if self.training else None

        def feed_forward(x: Tensor) -> Tensor:
            hidden = activation(linear1(x))  # (..., F)
            if record is not None:
                record(hidden=hidden)
            return linear2(hidden if dropout is None else dropout(hidden))

        return feed_forward
