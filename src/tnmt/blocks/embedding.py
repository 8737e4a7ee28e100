"""Token embeddings (section 3.4): ids -> vectors scaled by sqrt(d_model).

The scale makes the embeddings comparable in size to the positional encodings they are added to:
rows are initialised with std d_model^-0.5 (as in fairseq), so a scaled row has norm about sqrt(d_model)
while each sinusoid is in [-1, 1]. Sharing one matrix between source, target and the pre-softmax
projection is the paper's choice when both languages share a subword vocabulary; `Transformer` ties them.
"""

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn


class TokenEmbedding(nn.Module):
    """(B, T) ids -> (B, T, D) vectors, times sqrt(D) when `scale` is set, plus position vectors when given."""

    def __init__(self, vocab_size: int, d_model: int, *, pad_id: int, scale: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.pad_id = pad_id
        self.scale = math.sqrt(d_model) if scale else 1.0
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, std=self.weight.size(1) ** -0.5)
        if 0 <= self.pad_id < self.weight.size(0):
            with torch.no_grad():
                self.weight[self.pad_id].zero_()

    def forward(self, ids: Tensor, positions: Tensor | None = None) -> Tensor:
        """ids (B, T) -> (B, T, D); with `positions` (T, D), plus those."""
        return self.bind()(ids, positions)

    def bind(self) -> Callable[[Tensor, Tensor | None], Tensor]:
        """`forward` as a function of this module's tensors (blocks/bound.py): what a decoder step starts from."""
        weight, scale = self.weight, self.scale

        def embed(ids: Tensor, positions: Tensor | None = None) -> Tensor:
            vectors = torch.embedding(weight, ids)  # what nn.functional.embedding calls, less its checks
            # scaled and added in one operation: in three, a step's embedding costs as much as a product at batch 1
            return vectors * scale if positions is None else torch.add(positions, vectors, alpha=scale)

        return embed
