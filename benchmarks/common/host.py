"""What machine a benchmark ran on: its CPU model and its measured matmul peak.

Figures from different hosts differ by 2x and more (updates per minute, sentences per second), so every
result file names the CPU (platform.processor() is empty on Linux: /proc/cpuinfo says it) and, where
efficiency matters, the GFLOP/s a plain square matmul reaches on it.
"""

import os
import platform
import time
from pathlib import Path

import torch


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    return model or platform.processor() or platform.machine()


def describe() -> dict:
    """The host fields every result file carries."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def matmul_peak(dtype: torch.dtype, threads: int, n: int = 2048, seconds: float = 2.0) -> float:
    """Best GFLOP/s of an n x n matmul loop in `dtype` on `threads` threads.

    A dtype the CPU has no instructions for (bf16 without AVX-512 BF16 or AMX) runs at well under
    1 GFLOP/s, a minute per product at n = 2048: a warm product of n / 8 tells, and when the full-size
    loop would overrun `seconds` its rate is the answer (bf16 on an AVX2 host: 1.4 GFLOP/s at n = 256,
    0.3 at 2048, against 150-170 fp32), so such a host costs a second, not four minutes.
    """
    torch.set_num_threads(threads)
    small = n // 8
    a, b = torch.randn(small, small).to(dtype), torch.randn(small, small).to(dtype)
    probe = max(_gflops(a, b) for _ in range(3))  # the first call warms up; max: a preempted call misleads
    if 2 * n**3 / (probe * 1e9) > seconds:
        return probe
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    for _ in range(3):
        a @ b
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        best = max(best, _gflops(a, b))
    return best


def _gflops(a: torch.Tensor, b: torch.Tensor) -> float:
    """GFLOP/s of one product of two square matrices."""
    started = time.perf_counter()
    a @ b
    return 2 * a.shape[0] ** 3 / (time.perf_counter() - started) / 1e9
