"""A frozen model's decoder products, from copies of its weights laid out for the product at hand.

Why: at translation sizes a decoder step is a few dozen small products, and MKL's product on a Linear layer's
weights as stored, (out, in), is not the fastest way to them on CPU:

- the layers' products (`transposed_linear`): on a contiguous (in, out) transpose, the product of up to ~200
  rows takes 0.55-0.85x the time (AMX Xeon, `benchmarks/speed/step_ops.py`: (1, 128) x (128, 384) 4.4 against
  7.2 us, 64 rows 44 against 50 us); from ~250 rows it is no faster, so more rows take the weights as stored;
- the (V, D) pre-softmax projection (`OutputProjection`), the largest product of a step, bound by reading the
  weights from memory: at one row MKL streams a contiguous (D, V) transpose up to 3x faster than the (V, D)
  matrix (AMD EPYC, 8000 x 128: 180 against 568 us), and from two rows oneDNN's product on a prepacked copy
  is 1.5-2.3x faster than MKL's (64 rows: 3772 against 5513 us).

Each copy costs 4 bytes per weight. Copies are only right while the weights do not change, so they belong to
whoever knows that: a `Translator` that loaded its own model (`Translator.from_checkpoint`) binds its decoder
once with them (`Transformer.incremental_decoder(project=..., linear=...)`) for every search. A model that
trains on keeps its own weights.
"""

from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tnmt.blocks.bound import Linear, bind_linear
from tnmt.model import Transformer

TRANSPOSED_MAX_ROWS = 192  # rows up to which a layer's product takes the transposed copy
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
        return _float_cpu_linear(model.output)

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


def transposed_linear(module: nn.Module, rows: slice | None = None) -> Linear:
    """A frozen Linear layer (or rows of it) as a function, for `Transformer.incremental_decoder(linear=...)`:
    on a transposed copy of its weights up to `TRANSPOSED_MAX_ROWS` rows of input (N, in), as stored from there;
    a layer that copies would not help (int8, another device or dtype) as `bind_linear` binds it."""
    if not _float_cpu_linear(module):
        return bind_linear(module, rows)
    weight, bias = module.weight.detach(), module.bias
    if rows is not None:
        weight, bias = weight[rows], bias[rows]
    bias = None if bias is None else bias.detach()
    transposed = weight.t().contiguous()  # (in, out)
    stored = partial(F.linear, weight=weight, bias=bias)

    def linear(x: Tensor) -> Tensor:  # (N, in) -> (N, out)
        if x.size(0) > TRANSPOSED_MAX_ROWS:
            return stored(x)
        return torch.mm(x, transposed) if bias is None else torch.addmm(bias, x, transposed)

    return linear


def _float_cpu_linear(module: nn.Module) -> bool:
    return type(module) is nn.Linear and module.weight.device.type == "cpu" and module.weight.dtype == torch.float32


class ShortlistProjection:
    """`Transformer.project` onto a batch's candidate pieces (data/shortlist.py): features (M, D) -> logits (M, V),
    -inf outside the candidates (K,); the product runs on a (D, K) copy of their weights, made once per search."""

    def __init__(self, weight: Tensor, bias: Tensor | None, candidates: Tensor) -> None:
        """`weight` (V, D) and `bias` (V,) of the full projection (copied for the candidates (K,), once per
        search), which must not change while this object is used."""
        self.ids = candidates
        self.weight = weight.detach().index_select(0, candidates).t().contiguous()  # (D, K), the product's layout
        self.bias = None if bias is None else bias.detach().index_select(0, candidates)  # (K,)
        self.vocab_size = weight.size(0)

    def __call__(self, features: Tensor) -> Tensor:
        small = (
            torch.mm(features, self.weight) if self.bias is None else torch.addmm(self.bias, features, self.weight)
        )  # (M, K)
        logits = small.new_full((features.size(0), self.vocab_size), float("-inf"))
        return logits.index_copy_(1, self.ids, small)  # (M, V)
