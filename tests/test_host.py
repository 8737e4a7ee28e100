"""benchmarks/common/host.py: the fields every result file carries, and matmul_peak's two branches.

The branch matters: on a CPU without bf16 instructions the full-size loop would take minutes, so a
slow small product must answer alone; on a fast one the full-size loop must run and report its best.
"""

import itertools

import torch

from benchmarks.common import host


def _fake_gflops(monkeypatch, rates: list[float], then: float) -> list[int]:
    """Replace the timed product by `rates` in turn, `then` ever after; return the sizes it was called with."""
    sizes: list[int] = []
    cycle = itertools.chain(rates, itertools.repeat(then))

    def fake(a: torch.Tensor, b: torch.Tensor) -> float:
        sizes.append(a.shape[0])
        return next(cycle)

    monkeypatch.setattr(host, "_gflops", fake)
    return sizes


def test_a_slow_dtype_is_answered_by_the_small_probe(monkeypatch):
    # 0.5 GFLOP/s: a 512 x 512 product would take 0.54 s, over the 0.1 s allowed
    sizes = _fake_gflops(monkeypatch, [0.2, 0.5, 0.3], then=0.1)
    assert host.matmul_peak(torch.float32, threads=1, n=512, seconds=0.1) == 0.5
    assert sizes == [64, 64, 64]


def test_a_fast_dtype_runs_the_full_size_loop_and_reports_its_best(monkeypatch):
    sizes = _fake_gflops(monkeypatch, [100.0, 100.0, 100.0, 80.0, 120.0], then=90.0)
    assert host.matmul_peak(torch.float32, threads=1, n=512, seconds=0.05) == 120.0
    assert sizes[:3] == [64, 64, 64] and set(sizes[3:]) == {512} and len(sizes) > 5


def test_real_measurement_and_host_fields():
    assert host.matmul_peak(torch.float32, threads=1, n=128, seconds=0.05) > 0
    fields = host.describe()
    assert fields["cpu"] and fields["cores"] >= 1 and fields["torch"] == torch.__version__
