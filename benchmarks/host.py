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
    """Best GFLOP/s of an n x n matmul loop in `dtype` on `threads` threads."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    for _ in range(3):
        a @ b
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        a @ b
        best = max(best, 2 * n**3 / (time.perf_counter() - started) / 1e9)
    return best
