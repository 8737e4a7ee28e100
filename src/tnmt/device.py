"""Where training and decoding run, and in which precision a training step computes.

A recipe says `train.device = "auto" | "cpu" | "cuda"` (auto: CUDA when there is one) and
`train.precision = "auto" | "fp32" | "bf16" | "fp16"`. Mixed precision keeps fp32 master weights and Adam
moments and autocasts the forward pass: bf16 needs no loss scaling (same exponent range as fp32); fp16
does, so it comes with `torch.amp.GradScaler`. A GPU without bf16 (before Ampere) gets fp16 + scaling
when bf16 is asked for, with a note. "auto" takes mixed precision only where it is faster: on a GPU, and
on a CPU with AMX bf16 tiles. An AVX-512 bf16 CPU without AMX multiplies bf16 matrices at about half its
fp32 rate (148 against 265 GFLOP/s on a 2-core Xeon whose hypervisor hides AMX), and the Multi30k recipe
trained 1.3x slower there in bf16 than in fp32 (4500 against 6000 target tokens/s); with AMX, bf16 was
1.3x faster (benchmarks/NOTEBOOK.md). The decisions are plain functions of (setting, capabilities), so they
are tested on machines without a GPU; the CUDA-only work they lead to is a few lines in the loop.
"""

import logging
from dataclasses import dataclass
from typing import Literal

import torch

from tnmt.data.batching import Batch
from tnmt.errors import UserError

log = logging.getLogger("tnmt")

DeviceKind = Literal["auto", "cpu", "cuda"]
Precision = Literal["auto", "fp32", "bf16", "fp16"]


def resolve_device(kind: DeviceKind, *, local_rank: int = 0, cuda_available: bool | None = None) -> torch.device:
    """The device for `kind`; under torchrun each process of a machine takes GPU number `local_rank`.

    Raises:
        UserError: "cuda" was asked for and there is no CUDA device.
    """
    available = torch.cuda.is_available() if cuda_available is None else cuda_available
    if kind == "cuda" and not available:
        raise UserError("device = 'cuda' but PyTorch sees no CUDA device (torch.cuda.is_available() is False)")
    use_cuda = kind == "cuda" or (kind == "auto" and available)
    return torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")


@dataclass(frozen=True)
class MixedPrecision:
    """How a training step computes: the autocast dtype (None = fp32 throughout) and whether to scale the loss."""

    dtype: torch.dtype | None
    scaled: bool  # fp16 gradients underflow without loss scaling


def cpu_has_amx_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices in AMX tiles (Sapphire Rapids and later, when exposed)."""
    return bool(torch.cpu.get_capabilities().get("amx_bf16", False))


def mixed_precision(
    precision: Precision, device: torch.device, *, bf16_supported: bool | None = None, amx: bool | None = None
) -> MixedPrecision:
    """The autocast dtype and loss scaling for `precision` on `device` ("auto": see the module docstring).

    Raises:
        UserError: fp16 on the CPU (no fp16 matmul worth having there; use bf16).
    """
    if precision == "auto":
        fast_bf16 = device.type == "cuda" or (cpu_has_amx_bf16() if amx is None else amx)
        precision = "bf16" if fast_bf16 else "fp32"
        where = "a GPU" if device.type == "cuda" else "a CPU " + ("with" if fast_bf16 else "without") + " AMX bf16"
        log.info("precision = 'auto': %s on %s", precision, where)
    if precision == "fp32":
        return MixedPrecision(dtype=None, scaled=False)
    if device.type != "cuda":
        if precision == "fp16":
            raise UserError("train.precision = 'fp16' needs a CUDA device; on the CPU use 'bf16' or 'fp32'")
        return MixedPrecision(dtype=torch.bfloat16, scaled=False)
    supported = torch.cuda.is_bf16_supported() if bf16_supported is None else bf16_supported
    if precision == "bf16" and supported:
        return MixedPrecision(dtype=torch.bfloat16, scaled=False)
    if precision == "bf16":
        log.info("this GPU has no bf16: training in fp16 with loss scaling instead")
    return MixedPrecision(dtype=torch.float16, scaled=True)


def to_device(batch: Batch, device: torch.device) -> Batch:
    """`batch` on `device`; to a GPU through pinned memory, so the copy overlaps the previous step's kernels."""
    if device.type == "cpu":
        return batch

    def move(t: torch.Tensor) -> torch.Tensor:
        return t.pin_memory().to(device, non_blocking=True)

    return Batch(
        src=move(batch.src),
        tgt_in=move(batch.tgt_in),
        tgt_out=move(batch.tgt_out),
        n_tgt_tokens=batch.n_tgt_tokens,
        alignment=None if batch.alignment is None else move(batch.alignment),
    )
