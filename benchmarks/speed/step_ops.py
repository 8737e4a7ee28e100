"""The operator-level choices of the decoder step (`Transformer.incremental_decoder`, translate/frozen.py), timed here.

    python -m benchmarks.speed.step_ops [--threads 1]

Each row times the alternatives the step chooses between, at the shapes of the Multi30k recipe's decoder
(d_model 128, 4 heads, vocabulary 8000), median of 5 repeats, in microseconds:
- the output projection (rows x 128 -> 8000): `F.linear` on the (V, D) weights as stored, `torch.mm` on a
  contiguous (D, V) transpose, and oneDNN on prepacked weights; at 1 row also "cold", after a 16 MB pass
  that evicts the caches, as inside a step where the other layers' weights pass through the cache between
  two projections;
- attention of one query per group: the fused kernel (4-d inputs) against two batched products and a
  softmax, at batch 1 and 64 (4 and 256 groups, 20 keys);
- per-call costs: an empty tensor op, a 1 x 128 x 384 Linear, indexing a 6-d tensor from Python;
- exp over 64 x 8000 floats (log-softmax's cost), and the host's fp32 matmul peak (1024^3).
Results: benchmarks/results/step_ops.json.
"""

import argparse
import json
import statistics
import timeit
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.common.host import describe


def micros(run, number: int) -> float:
    """Median microseconds per call of `run` over 5 repeats of `number` calls, after a warm-up."""
    run()
    return round(statistics.median(timeit.repeat(run, number=number, repeat=5)) / number * 1e6, 1)


def output_projection() -> dict:
    weight = torch.randn(8000, 128)
    transposed, packed = weight.t().contiguous(), torch.ops.mkldnn._reorder_linear_weight(weight, 64)
    evict = torch.randn(4 * 2**20)  # 16 MB

    def cold(project):
        def run():
            evict.add_(1.0)
            project()

        return run

    rows = {}
    for n in (1, 2, 4, 16, 64):
        x = torch.randn(n, 128)
        ways = {
            "F.linear (V, D)": lambda x=x: F.linear(x, weight),
            "mm on the (D, V) transpose": lambda x=x: torch.mm(x, transposed),
            "oneDNN prepacked": lambda x=x: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], ""),
        }
        number = max(10, 400 // n)
        rows[f"{n} rows"] = {name: micros(run, number) for name, run in ways.items()}
        if n == 1:
            eviction = micros(lambda: evict.add_(1.0), 50)
            rows["1 row, cold"] = {name: round(micros(cold(run), 50) - eviction, 1) for name, run in ways.items()}
    return rows


def attention() -> dict:
    rows = {}
    for batch in (1, 64):
        groups = batch * 4
        q, k, v = torch.randn(1, groups, 1, 32), torch.randn(1, groups, 20, 32), torch.randn(1, groups, 20, 32)

        def products(q=q, k=k, v=v):
            scores = torch.bmm(q[0], k[0].transpose(1, 2)).mul_(32**-0.5)
            return torch.bmm(scores.softmax(dim=-1), v[0])

        rows[f"batch {batch} ({groups} groups)"] = {
            "fused kernel, 4-d": micros(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v), 500),
            "fused kernel, 3-d (composite path)": micros(
                lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q[0], k[0], v[0]), 500
            ),
            "batched products + softmax": micros(products, 500),
        }
    return rows


def per_call() -> dict:
    x, w, b = torch.randn(1, 128), torch.randn(384, 128), torch.randn(384)
    kv = torch.randn(4, 2, 1, 4, 40, 32)
    qkv = torch.randn(1, 384)

    def index():
        kv[1, :, :, :, 7] = qkv[:, 128:].view(1, 2, 4, 32).transpose(0, 1)

    return {
        "x + x (1 x 128)": micros(lambda: x + x, 5000),
        "F.linear 1 x 128 -> 384": micros(lambda: F.linear(x, w, b), 5000),
        "kv[1, :, :, :, 7] = ... (6-d indexing from Python)": micros(index, 5000),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "step_ops.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with torch.inference_mode():
        logits, a = torch.randn(64, 8000), torch.randn(1024, 1024)
        seconds = statistics.median(timeit.repeat(lambda: a @ a, number=5, repeat=5)) / 5
        report = {
            "host": describe(),
            "threads": args.threads,
            "output projection (us)": output_projection(),
            "attention, one query per group (us)": attention(),
            "per call (us)": per_call(),
            "exp over 64 x 8000 (us)": micros(logits.exp, 100),
            "log_softmax over 64 x 8000 (us)": micros(lambda: logits.log_softmax(dim=1), 100),
            "matmul peak 1024^3 (GFLOP/s)": round(2 * 1024**3 / seconds / 1e9, 1),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
