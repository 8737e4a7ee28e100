"""Positional information (section 3.5): attention alone is blind to word order.

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

Each pair of dimensions is a rotation at its own frequency, so PE(pos + k) is a fixed linear map of
PE(pos) for every pos: the paper's argument that relative positions are easy to learn. The "concat"
layout puts all sines before all cosines ([sin | cos]) with the same frequencies, as MarianMT does;
fairseq also concatenates but uses 10000^(i / (d/2 - 1)) as frequencies. The learned variant is the
paper's alternative (Table 3 row E). Positions start at 0.
"""

import math

import torch
from torch import Tensor, nn


def sinusoidal_table(max_len: int, d_model: int, *, layout: str = "interleaved") -> Tensor:
    """The (max_len, d_model) table of sinusoids, in the "interleaved" or "concat" layout."""
    if d_model % 2:
        raise ValueError(f"sinusoidal positions need an even d_model, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = position * inv_freq  # (L, D/2)
    if layout == "interleaved":
        table = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)  # (L, D/2, 2) -> (L, D)
    elif layout == "concat":
        table = torch.cat([angles.sin(), angles.cos()], dim=-1)  # (L, D)
    else:
        raise ValueError(f"positional_layout must be 'interleaved' or 'concat', got {layout!r}")
    return table.float()


class PositionalEncoding(nn.Module):
    """Adds position vectors to (B, T, D) embeddings, starting at position `start` (KV-cache decoding)."""

    def __init__(self, max_len: int, d_model: int, *, kind: str = "sinusoidal", layout: str = "interleaved"):
        super().__init__()
        self.max_len = max_len
        if kind == "sinusoidal":
            # A non-persistent buffer: derived from the config, so checkpoints need not store it.
            self.register_buffer("table", sinusoidal_table(max_len, d_model, layout=layout), persistent=False)
            self.learned = None
        elif kind == "learned":
            self.learned = nn.Embedding(max_len, d_model)
        else:
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {kind!r}")

    def forward(self, x: Tensor, *, start: int = 0) -> Tensor:
        return x + self.rows(start, x.size(1))

    def rows(self, start: int, length: int) -> Tensor:
        """The position vectors of positions start ... start + length - 1: (length, D)."""
        end = start + length
        if end > self.max_len:
            raise ValueError(f"sequence of {end} positions exceeds max_len={self.max_len} (ModelConfig.max_len)")
        return (self.table if self.learned is None else self.learned.weight)[start:end]
