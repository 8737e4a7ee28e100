"""Layers as plain functions of their own tensors: what a decoder step calls.

Why: a decoder step at translation sizes is a few dozen small operations (d_model 128, one row: a product
takes ~7 us), and reaching them through `nn.Module` costs about as much again. Every module call goes through
`Module.__call__`, and every parameter or sub-module read from a module through the Python-level
`Module.__getattr__`: ~0.7 us per read, ~3.7 us for a Linear layer's call, ~160 reads per step of a 4-layer
decoder, which made a step at batch 1 1.3x slower than the same arithmetic on tensors held in locals (AMX Xeon,
benchmarks/speed/decode.py).

So the blocks that decode hand out their arithmetic bound to their tensors (`MultiHeadAttention.bind`,
`FeedForward.bind`, `Residual.bind`, `DecoderLayer.bind`), and a search binds its model once
(`Transformer.incremental_decoder`): a step then reads no module attribute. Binding takes the tensors
themselves, never copies, so it sees every in-place change of the weights; it takes the train/eval mode at
binding time, so a search binds afresh rather than keep a binding across a change of mode or a `.to()`.
"""

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Linear = Callable[[Tensor], Tensor]  # (..., in) -> (..., out)
LinearBinder = Callable[[nn.Module, slice | None], Linear]  # (a Linear layer, rows of it or None) -> a function


def bind_linear(module: nn.Module, rows: slice | None = None) -> Linear:
    """A Linear layer as a function of its own tensors, or of rows `rows` of its weight and bias (views: one block
    of a stacked projection); anything else (torch.ao's dynamic int8 Linear, which keeps its weights packed) as its
    `forward`, without the module call around it.

    The binder the blocks use unless given another: a `Translator` passes one that lays out copies of its frozen
    model's weights for the step's products (`tnmt.translate.frozen.transposed_linear`).
    """
    if type(module) is nn.Linear:
        weight, bias = module.weight, module.bias
        if rows is not None:
            weight, bias = weight[rows], bias[rows]
        return partial(F.linear, weight=weight, bias=bias)
    if rows is not None:
        raise ValueError(f"rows of a {type(module).__name__} cannot be bound: its weights are packed")
    return module.forward


def bind_norm(module: nn.LayerNorm) -> Linear:
    """A LayerNorm as a function of its own tensors."""
    # torch.layer_norm is what F.layer_norm calls, less a Python wrapper that costs a fifth of the call at one row
    return partial(
        torch.layer_norm,
        normalized_shape=module.normalized_shape,
        weight=module.weight,
        bias=module.bias,
        eps=module.eps,
    )
