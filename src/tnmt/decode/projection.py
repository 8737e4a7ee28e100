"""The output projection of a frozen model, from copies of its weights laid out for the product at hand.

Why: the (V, D) pre-softmax projection is the largest product of a decoder step, and at translation sizes
the step is bound by reading it from memory. MKL's product on the weights as stored is not the fastest way
to it: at one row MKL streams a contiguous (D, V) transpose up to 3x faster than the (V, D) matrix (AMD
EPYC, 8000 x 128: 180 against 568 us, `benchmarks/step_ops.py`), and from two rows oneDNN's product on a
prepacked copy is 1.5-2.3x faster than MKL's (64 rows: 3772 against 5513 us). Each copy costs 4 bytes per
weight.

Copies are only right while the weights do not change, so they belong to whoever knows that: a
`Translator` that loaded its own model (`Translator.from_checkpoint`) builds one `OutputProjection` and
passes it to every search (`Transformer.step(project=...)`). A model that trains on keeps its own
projection.
"""

import torch
from torch import Tensor, nn

from tnmt.model import Transformer

PACKED_MIN_ROWS = 2  # rows from which the product takes oneDNN's prepacked weights


class OutputProjection:
    """`Transformer.project` of a frozen model: features (M, D) -> logits (M, V), bias included."""

    def __init__(self, model: Transformer) -> None:
        """Copy the output weights of `model` (see `usable`); they must not change while this object is used."""
        weight = model.output.weight.detach()  # (V, D)
        self.transposed = weight.t().contiguous()  # (D, V)
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, 64) if _has_onednn() else None
        self.bias = None if model.logits_bias is None else model.logits_bias.detach()  # (V,)

    @staticmethod
    def usable(model: Transformer) -> bool:
        """Whether copies help: a float32 projection on the CPU (int8, other devices and dtypes keep theirs)."""
        weight = model.output.weight
        return type(model.output) is nn.Linear and weight.device.type == "cpu" and weight.dtype == torch.float32

    def __call__(self, features: Tensor) -> Tensor:
        if features.size(0) < PACKED_MIN_ROWS or self.packed is None:
            # (M, D) @ (D, V), the bias added by the same call
            return (
                torch.mm(features, self.transposed)
                if self.bias is None
                else torch.addmm(self.bias, features, self.transposed)
            )
        # oneDNN's linear on its own layout of the weights: a private op, the one PyTorch's compiler emits for
        # a frozen Linear on CPU (torch._inductor's mkldnn fusions)
        return torch.ops.mkldnn._linear_pointwise(features, self.packed, self.bias, "none", [], "")


def _has_onednn() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
