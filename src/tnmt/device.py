"""Where training and decoding run, and in which precision a training step computes.

A recipe says `train.device = "auto" | "cpu" | "cuda"` (auto: CUDA when there is one) and
`train.precision = "auto" | "fp32" | "bf16" | "fp16"`. Mixed precision keeps fp32 master weights and Adam
moments and autocasts the forward pass: bf16 needs no loss scaling (same exponent range as fp32); fp16
does, so it comes with `torch.amp.GradScaler`. A GPU without bf16 (before Ampere) gets fp16 + scaling
when bf16 is asked for, with a note. "auto" takes mixed precision only where it is faster: on a GPU, on a
CPU with AMX bf16 tiles, and on a CPU whose bf16 products, timed when training starts, run at least 1.2x its
fp32 ones. The instruction flags alone do not say it: an AVX-512 bf16 Xeon whose hypervisor hides AMX
multiplied bf16 matrices at about half its fp32 rate (148 against 265 GFLOP/s) and trained the Multi30k recipe
1.3x slower in bf16, while an AMD EPYC with the same flags multiplied them at 2.2x (426 against 194 GFLOP/s)
and trained it 1.6x faster (11,200 against 7,100 target tokens/s); with AMX, bf16 was 1.3x faster
(benchmarks/NOTEBOOK.md). The decisions are plain functions of (setting, capabilities, a timing), so they are
tested on machines without a GPU; the CUDA-only work they lead to is a few lines in the loop.
"""

import functools
import logging
import time
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


FAST_BF16 = 1.2  # the bf16 speed-up over fp32 from which "auto" trains a CPU in bf16


def cpu_has_amx_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices in AMX tiles (Sapphire Rapids and later, when exposed)."""
    return bool(torch.cpu.get_capabilities().get("amx_bf16", False))


@functools.cache
def cpu_bf16_speedup() -> float:
    """How much faster this CPU computes a training-sized product (2048 tokens x 128 -> 512) under bf16
    autocast than in fp32, casts included: the median of 5 timings of 10 products each (~50 ms in all). A CPU
    without bf16 instructions (nor AMX) gets 0 untimed: PyTorch would emulate bf16, far slower than fp32."""
    capabilities = torch.cpu.get_capabilities()
    if not (capabilities.get("amx_bf16") or capabilities.get("avx512_bf16")):
        return 0.0
    x, weight = torch.randn(2048, 128), torch.randn(512, 128)

    def seconds(dtype: torch.dtype | None) -> float:
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None), torch.no_grad():
            torch.nn.functional.linear(x, weight)  # warm-up: oneDNN builds its kernel on the first call
            times = []
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(10):
                    torch.nn.functional.linear(x, weight)
                times.append(time.perf_counter() - start)
        return sorted(times)[2]

    return seconds(None) / seconds(torch.bfloat16)


def mixed_precision(
    precision: Precision,
    device: torch.device,
    *,
    bf16_supported: bool | None = None,
    amx: bool | None = None,
    bf16_speedup: float | None = None,
) -> MixedPrecision:
    """The autocast dtype and loss scaling for `precision` on `device` ("auto": see the module docstring;
    `amx` and `bf16_speedup` stand in for this CPU's, in tests).

    Raises:
        UserError: fp16 on the CPU (no fp16 matmul worth having there; use bf16).
    """
    if precision == "auto":
        precision, where = _auto_precision(device, amx=amx, bf16_speedup=bf16_speedup)
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


def _auto_precision(device: torch.device, *, amx: bool | None, bf16_speedup: float | None) -> tuple[Precision, str]:
    """What "auto" trains in on `device`, and why (for the log)."""
    if device.type == "cuda":
        return "bf16", "a GPU"
    if cpu_has_amx_bf16() if amx is None else amx:
        return "bf16", "a CPU with AMX bf16"
    speedup = cpu_bf16_speedup() if bf16_speedup is None else bf16_speedup
    if not speedup:
        return "fp32", "a CPU without bf16 instructions"
    precision: Precision = "bf16" if speedup >= FAST_BF16 else "fp32"
    return precision, f"a CPU whose bf16 products run {speedup:.2f}x its fp32 ones (bf16 from {FAST_BF16}x)"


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
