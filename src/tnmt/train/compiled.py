"""`train.compile`: the encoder and decoder layers of training forward passes through `torch.compile`.

On a GPU a training step of the paper's base model is bound by what runs around the matrix products: every
sub-layer's dropout, residual sum and LayerNorm, each a kernel of its own that reads and writes the whole
activation (issue 55). `torch.compile` fuses them, and those of the backward pass, into a few kernels.

What is compiled is the call of one layer ("regional" compilation), not the whole model: the encoder's layers
share one graph and the decoder's another, so compiling costs two layers' time instead of twelve, and the model
itself stays the plain module (its state dict, checkpoints and decoding are untouched). Only training forward
passes take the compiled call (`Transformer._layer`); validation and decoding run eagerly as before.

Shapes: the first batch compiles for its shapes, a second shape recompiles once with symbolic lengths
(PyTorch's automatic dynamic shapes), and no batch after that compiles again. Batch lengths padded to a
multiple of `PAD_MULTIPLE` keep the sizes the kernels see divisible by it. Compiled code is cached on disk
(PyTorch's FX graph and kernel caches), so a run's second start compiles little.

If compiling the forward graph fails (no C compiler, no Triton, a PyTorch bug), the run logs the error once
and its layers run eagerly from then on (`CompiledLayerCall`): it costs speed, not the run. The backward graph
is compiled at the first backward pass (PyTorch lowers it lazily), where no fallback is possible; whatever
breaks the compiler breaks the forward graph first.

"auto" compiles on CUDA only: on a CPU the compilation takes minutes of a small machine's cores for a step
whose cost is the matrix products and the loss, not the kernels around them. The default is "off" until a GPU
run has measured the compiled step against the eager one (benchmarks/gpu/gpu_speed.py); then "auto".
"""

import logging
from collections.abc import Callable
from typing import Any, Literal

import torch
from torch import nn

from tnmt.model import Transformer

log = logging.getLogger("tnmt")

CompileSetting = Literal["off", "auto", "on"]
PAD_MULTIPLE = 8  # batch lengths of a compiled run are padded to this: sizes a compiled kernel can vectorise over


def compile_wanted(setting: CompileSetting, device: torch.device) -> bool:
    """Whether `train.compile = setting` compiles on `device` ("auto": on CUDA only)."""
    return setting == "on" or (setting == "auto" and device.type == "cuda")


def call_layer(layer: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """Run one layer: the function torch.compile compiles, the layer being an argument, so that every layer
    of a stack (same code, same shapes, other weights) reuses one compiled graph."""
    return layer(*args, **kwargs)


class CompiledLayerCall:
    """`call_layer` compiled, or, once its compilation has failed, `call_layer` itself."""

    def __init__(self, backend: str | Callable) -> None:
        self.compiled: Callable[..., Any] | None = torch.compile(call_layer, backend=backend)

    def __call__(self, layer: nn.Module, *args: Any, **kwargs: Any) -> Any:
        if self.compiled is None:
            return layer(*args, **kwargs)
        try:
            return self.compiled(layer, *args, **kwargs)
        except torch._dynamo.exc.TorchDynamoException as error:  # compiling failed; running errors pass through
            cause = getattr(error, "inner_exception", None) or error  # what the compiler raised, not dynamo's wrapper
            what = f"{type(cause).__name__}: {str(cause).strip().splitlines()[0] if str(cause).strip() else ''}"
            log.warning("train.compile: compiling a layer failed, training on eagerly: %s", what)
            self.compiled = None
            return layer(*args, **kwargs)


def compile_layers(model: Transformer, *, backend: str | Callable = "inductor") -> None:
    """Make `model`'s training forward passes run each layer through a `CompiledLayerCall`.

    Args:
        model: its `compiled_layer` is set (None = eager, as before).
        backend: torch.compile's backend; "inductor" generates fused kernels, tests use cheaper ones.
    """
    model.compiled_layer = CompiledLayerCall(backend)
    log.info("train.compile: the encoder and decoder layers of training forward passes are compiled")


def pad_multiple(compiled: bool) -> int:
    """The multiple batch lengths are padded to: `PAD_MULTIPLE` when the layers are compiled, else 1 (none)."""
    return PAD_MULTIPLE if compiled else 1
