"""Where the time of a training step and of a decoding step goes (issue 13's remaining gaps).

    python -m benchmarks.speed.profile_step [--threads 2] [--steps 10] [--what train,decode] [--checkpoint DIR]

`train`: the training step of `train_speed.py` (d 256, 3+3 layers, FFN 1024, vocab 8000, ~4k target
tokens, fused Adam) in fp32 and under bf16 autocast. The step is timed without the profiler (median of
`--steps`), then profiled; every operator's self time is put in a category (matrix products, casts and
copies, softmax, LayerNorm, dropout masks, elementwise passes and reductions, the optimizer, views and
allocations: the per-call overhead of small operators). MFU is split into its two
factors: the share of the step spent in matrix products, and how fast those products run against the
measured matmul peak (their FLOPs over their own time). A step reaches 65% MFU only if share x speed
does, so the two factors say which of them holds it back. One approximation: the model FLOPs include
attention's score and mixing products (~1% of them at Multi30k lengths), which fp32 runs inside
PyTorch's fused attention kernel, not in the products' time; fp32's speed is overstated by about that.

`decode`: greedy search, batch 16 and 64, the random d 256 model of `decode.py` (32 forced steps),
float32 and int8 (`quantize_int8`), at 1 thread (where CTranslate2 is fastest on this host); with
`--checkpoint`, also the trained model on the first test_2016_flickr sentences (its own length
limits) at batch 1, 16 and 64: float32 and int8, on `Transformer.incremental_decoder`. Categories as above plus int8's
own: quantised products, and the quantisation of activations.
Results go to benchmarks/results/profile_step.json and a summary on stdout.
"""

import argparse
import json
import statistics
import time
from collections import defaultdict
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.common.host import describe, matmul_peak
from benchmarks.speed.train_speed import make_batch, make_runner, model_flops, pick_lengths

RESULTS = Path(__file__).resolve().parents[1] / "results" / "profile_step.json"
# Operator -> category: exact aten names first, then name fragments (quantized::, fused kernels).
EXACT = {
    "matrix products": {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
                        "mkldnn::_linear_pointwise"},
    "casts and copies": {"aten::_to_copy", "aten::copy_", "aten::to", "aten::clone", "aten::contiguous"},
    "dropout masks": {"aten::random_", "aten::bernoulli_", "aten::dropout"},
    "gather / select / cat": {"aten::index_select", "aten::gather", "aten::cat", "aten::topk", "aten::argmax",
                              "aten::sort", "aten::index", "aten::take_along_dim", "aten::scatter_"},
    "views, allocation, wrappers (per-call overhead)": {
        "aten::as_strided", "aten::t", "aten::transpose", "aten::slice", "aten::expand", "aten::view",
        "aten::reshape", "aten::unsqueeze", "aten::squeeze", "aten::permute", "aten::select", "aten::empty",
        "aten::empty_like", "aten::empty_strided", "aten::linear", "aten::_unsafe_view", "aten::resize_",
        "aten::detach", "aten::alias", "aten::narrow", "aten::split", "aten::unbind", "aten::chunk",
        "aten::flatten", "aten::lift_fresh", "aten::new_empty", "aten::zeros", "aten::full"},
}  # fmt: skip
FRAGMENTS = [
    ("int8 products", ("quantized::linear", "linear_dynamic", "fbgemm")),
    ("int8 activation quantisation", ("quantize_per_tensor", "choose_qparams", "dequantize")),
    ("attention kernel", ("scaled_dot_product", "flash_attention")),
    ("softmax", ("softmax",)),
    ("LayerNorm", ("layer_norm",)),
    ("optimizer", ("_fused_adam",)),
    ("elementwise and reductions", ("aten::",)),  # what remains of aten: add, mul, exp, log, sum, amax ...
]


def category(op: str) -> str:
    exact = next((name for name, ops in EXACT.items() if op in ops), None)
    return exact or next((name for name, keys in FRAGMENTS if any(k in op for k in keys)), "other")


def profiled(run, steps: int) -> dict:
    """Self CPU time per category and the 12 costliest operators, in ms per call of `run`."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            run()
    by_category, ops = defaultdict(float), []
    for event in prof.key_averages():
        ms = event.self_cpu_time_total / 1e3 / steps
        by_category[category(event.key)] += ms
        ops.append((ms, event.key, event.count // steps))
    total = sum(by_category.values())
    top = [{"op": k, "ms": round(ms, 3), "calls": n} for ms, k, n in sorted(ops, reverse=True)[:12]]
    return {
        "profiled_ms": round(total, 2),
        "categories_pct": {k: round(100 * v / total, 1) for k, v in sorted(by_category.items(), key=lambda x: -x[1])},
        "categories_ms": {k: round(v, 3) for k, v in by_category.items()},
        "top_ops": top,
        "aten_calls": sum(n for *_, n in ops),
    }


def timed(run, steps: int) -> float:
    """Median seconds of one call of `run`, without the profiler."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def profile_training(threads: int, steps: int) -> dict:
    lengths, origin = pick_lengths("bucketed")
    src, tgt_in, tgt_out = make_batch(lengths)
    n_tokens = int((tgt_out != 0).sum())
    flops = model_flops(lengths)
    report = {"batch": {"sentences": len(lengths), "target_tokens": n_tokens, "lengths": origin}}
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        runner = make_runner("tnmt", precision, threads, adam="fused")
        step = partial(runner.step, src, tgt_in, tgt_out, n_tokens)
        for _ in range(2):
            step()
        step_s = timed(step, steps)
        peak = matmul_peak(dtype, threads)
        torch.set_num_threads(threads)
        prof = profiled(step, steps)
        share = prof["categories_ms"].get("matrix products", 0.0) / prof["profiled_ms"]
        matmul_s = share * step_s  # the products' share of the unprofiled step
        report[precision] = {
            "step_s": round(step_s, 4),
            "target_tokens_per_s": round(n_tokens / step_s),
            "matmul_peak_gflops": round(peak),
            "mfu_pct": round(100 * flops / step_s / peak / 1e9, 1),
            "matmul_share_pct": round(100 * share, 1),
            "matmul_speed_pct_of_peak": round(100 * flops / matmul_s / peak / 1e9, 1),
            **prof,
        }
    return report


def random_decoder(quantize: bool):
    from benchmarks.speed.decode import SHAPE, tnmt_model

    sources = torch.randint(3, SHAPE["vocab"] - 1, (64, 16), generator=torch.Generator().manual_seed(0))
    return tnmt_model(quantize=quantize), sources


def profile_decoding(steps: int, checkpoint: Path | None) -> dict:
    from tnmt.config import DecodeConfig
    from tnmt.decode import greedy_search

    torch.set_num_threads(1)
    report = {"threads": 1}
    for quantize in (False, True):
        model, sources = random_decoder(quantize)
        for batch in (16, 64):
            run = partial(greedy_search, model, sources[:batch], DecodeConfig(max_len=32, min_len=32))
            run()
            seconds = timed(run, steps)
            report[f"random-d256 {'int8' if quantize else 'fp32'} greedy b{batch}"] = {
                "tokens_per_s": round(batch * 32 / seconds),
                "ms_per_step": round(1e3 * seconds / 32, 3),
                **profiled(run, steps),
            }
    if checkpoint is not None:
        from benchmarks.speed.decode import data_dir, read_gz
        from tnmt.translate.translator import Translator

        texts = sorted(read_gz(data_dir() / "test_2016_flickr.en.gz")[:256], key=lambda t: -len(t.split()))
        for quantize in ("none", "int8"):
            translator = Translator.from_checkpoint(checkpoint, quantize=quantize)
            for batch in (1, 16, 64):
                some = texts[::8] if batch == 1 else texts  # 32 sentences one at a time
                settings = replace(translator.decode, beam_size=1, batch_size=batch)
                run = partial(translator.translate, some, settings)
                run()
                seconds = timed(run, max(3, steps // 3))
                report[f"checkpoint {'int8' if quantize == 'int8' else 'fp32'} greedy b{batch}"] = {
                    "sentences_per_s": round(len(some) / seconds, 1),
                    **profiled(run, max(3, steps // 3)),
                }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="training threads (decoding runs at 1)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--what", default="train,decode")
    parser.add_argument("--checkpoint", type=Path, help="a trained tnmt checkpoint for the decoding profile")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    report = {"host": describe(), "command": "python -m benchmarks.speed.profile_step " + " ".join(
        f"--{k} {v}" for k, v in vars(args).items() if v is not None and k != "out")}  # fmt: skip
    if "train" in args.what:
        report["train"] = profile_training(args.threads, args.steps)
    if "decode" in args.what:
        report["decode"] = profile_decoding(args.steps, args.checkpoint)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    for section in ("train", "decode"):
        for name, row in report.get(section, {}).items():
            if isinstance(row, dict) and "categories_pct" in row:
                head = {k: v for k, v in row.items() if not isinstance(v, dict | list)}
                print(section, name, head, row["categories_pct"])


if __name__ == "__main__":
    main()
