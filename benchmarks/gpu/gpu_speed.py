"""One command on a GPU machine (issue 55): the training levers of the paper's base shape, each measured, and
the same loss curve with and without them, into one JSON.

    GPU_SCRIPT=gpu_speed.py bash benchmarks/gpu/gpu_check.sh --out $OUT/gpu_speed.json   # as gpu_stage.sh lays it out
    python -m benchmarks.gpu.gpu_speed --out speed.json [--data DIR] [--sections levers,loss_curve,big_shape]
    python -m benchmarks.gpu.gpu_speed --dry-run --out speed.json        # every section on the CPU, tiny: seconds

Without a CUDA GPU (and without --dry-run) it stops at once with exit status 2. Each section records its status,
seconds and figures (or its error, and the next one runs); the JSON is rewritten after every section.

  levers      the paper's base model (d 512, 6+6 layers, 37k shared vocabulary) on a synthetic batch of ~25k target
              tokens, bf16 autocast: today's path, each lever changed alone, and all levers; per setting the
              update's milliseconds (median of CUDA-event timings after warm-up), target tokens/s, model TFLOP/s,
              MFU against the bf16 matmul peak measured in the same run, and peak GPU memory. The levers:
                loss_blocks      the fused loss in memory-sized blocks (train/loss.py GPU_BLOCKS), not cache-sized
                no_sync          nothing read back per update (today: the loss, and the token count of nonzero())
                compile          the layers through torch.compile (train/compiled.py), inductor, cold cache
                fused_adam       Adam's fused kernel (today's); off: the foreach implementation
                fused_attention  PyTorch's fused SDPA kernels (today's on CUDA); off: the math backend
  loss_curve  configs/multi30k_en_de.toml's first 200 updates (`tnmt train`, bf16) three times: today's path
              (train.compile off), the new path (train.compile on, so batches padded to 8), and today's path with
              another seed, the yardstick of what noise alone moves; the logged losses every 10 updates, their
              differences, validation loss at 200, and median tokens/s.
  big_shape   the paper's big model (d 1024, 16 heads, d_ff 4096), today's path against all levers.

Timings reuse gpu_check.py's helpers (CUDA events, the matmul peak, the FLOP count), so both scripts measure alike.
"""

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from benchmarks.gpu.gpu_check import (
    DRY_TRAINING,
    NO_GPU,
    RECIPE,
    REPO,
    TNMT,
    child,
    commit,
    failed_if_a_part_failed,
    guarded,
    machine,
    matmul_peak_tflops,
    model_flops,
    synthetic_batch,
    timed_updates,
)

CURVE_UPDATES, CURVE_EVERY = 200, 10


@dataclass(frozen=True)
class Levers:
    """Which of issue 55's levers an update uses (module docstring)."""

    loss_blocks: bool = False
    no_sync: bool = False
    compile: bool = False
    fused_adam: bool = True
    fused_attention: bool = True


TODAY = Levers()
ALL = Levers(loss_blocks=True, no_sync=True, compile=True)
SETTINGS = {
    "today": TODAY,
    "loss_blocks": replace(TODAY, loss_blocks=True),
    "no_sync": replace(TODAY, no_sync=True),
    "compile": replace(TODAY, compile=True),
    "no_fused_adam": replace(TODAY, fused_adam=False),
    "no_fused_attention": replace(TODAY, fused_attention=False),
    "all": ALL,
}


@dataclass(frozen=True)
class Sizes:
    """How large the sections run: `REAL` on the GPU, `DRY` on a CPU in seconds."""

    base: dict[str, int]  # changes to the paper's base shape
    big: dict[str, int]  # changes to the paper's big shape
    vocab: int
    batch: tuple[int, int]  # sentences, positions per sentence on both sides
    steps: tuple[int, int]  # warm-up and timed updates of each setting
    peak_n: int
    backend: str  # torch.compile's: inductor on the GPU, a tracing one that generates no code on the CPU
    curve: tuple[str, ...]  # recipe overrides of every loss_curve run
    new_path: tuple[str, ...]  # and of the new path's


_TINY = {"d_model": 64, "n_heads": 2, "d_ff": 128, "n_encoder_layers": 1, "n_decoder_layers": 1}
REAL = Sizes(
    base={},
    big={},
    vocab=37_000,
    batch=(781, 32),  # 24,992 target tokens, no padding
    steps=(3, 10),
    peak_n=8192,
    backend="inductor",
    curve=(
        f"--train.max_steps={CURVE_UPDATES}",
        f"--train.log_every={CURVE_EVERY}",
        f"--train.eval_every={CURVE_UPDATES}",
        "--data.max_valid_pairs=100",
        "--train.keep_checkpoints=1",
    ),
    new_path=("--train.compile=on",),
)
DRY = Sizes(
    base=_TINY,
    big=_TINY,
    vocab=1000,
    batch=(16, 16),
    steps=(1, 2),
    peak_n=256,
    backend="aot_eager",
    curve=(*DRY_TRAINING, "--train.eval_every=4"),  # gpu_check's dry run, validated once at the end
    new_path=(),  # inductor's C++ compilation takes minutes here; tests/test_compiled.py checks the switch
)


@dataclass(frozen=True)
class Speed:
    dry_run: bool
    data: Path
    work: Path

    @property
    def device(self) -> torch.device:
        return torch.device("cpu" if self.dry_run else "cuda")

    @property
    def sizes(self) -> Sizes:
        return DRY if self.dry_run else REAL


# --- levers and big_shape ---


def levers(speed: Speed) -> dict:
    return measure_shape(speed, "base", speed.sizes.base, SETTINGS)


def big_shape(speed: Speed) -> dict:
    return measure_shape(speed, "big", speed.sizes.big, {"today": TODAY, "all": ALL})


def measure_shape(speed: Speed, preset: str, changes: dict[str, int], settings: dict[str, Levers]) -> dict:
    """The shape's figures under each setting, after the bf16 matmul peak they are measured against."""
    from tnmt.config import ModelConfig

    sizes, device = speed.sizes, speed.device
    peak, mean_peak = matmul_peak_tflops(device, sizes.peak_n)
    vocab = sizes.vocab
    config = getattr(ModelConfig, preset)(src_vocab_size=vocab, tgt_vocab_size=vocab, **changes)
    batch = synthetic_batch(config, *sizes.batch)
    flops = model_flops(config, batch)
    result: dict = {
        "shape": {"d_model": config.d_model, "d_ff": config.d_ff, "heads": config.n_heads, "vocabulary": vocab},
        "layers": [config.n_encoder_layers, config.n_decoder_layers],
        "target_tokens": batch.n_tgt_tokens,
        "bf16_matmul_peak_tflops": {"n": sizes.peak_n, "best": round(peak, 3), "mean": round(mean_peak, 3)},
        "model_tflop_per_update": round(flops / 1e12, 4),
    }
    for name, chosen in settings.items():
        part = partial(measure_setting, speed, config, batch, chosen, flops=flops, peak=peak)
        result[name] = guarded(part) | {"levers": asdict(chosen)}
    return failed_if_a_part_failed(result)


def measure_setting(speed: Speed, config, batch, chosen: Levers, *, flops: float, peak: float) -> dict:
    """One setting's figures; its model and optimizer are freed before the next setting builds its own."""
    from tnmt.device import to_device
    from tnmt.model import Transformer
    from tnmt.train.compiled import compile_layers

    device = speed.device
    torch.manual_seed(0)
    model = Transformer(config).to(device).train()
    if chosen.compile:
        compile_layers(model, backend=speed.sizes.backend)
    kernel = {"fused": True} if chosen.fused_adam else {"foreach": True}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, **kernel)
    on_device = to_device(batch, device)
    step = partial(update, model, optimizer, on_device, chosen)
    start = time.monotonic()
    step()  # the first update: compilation when compiled
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    first = time.monotonic() - start
    try:
        figures = timed_updates(
            step, device, speed.sizes.steps, tokens=batch.n_tgt_tokens, flops=flops, peak_tflops=peak
        )
    finally:
        del model, optimizer, step
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return figures | {"first_update_s": round(first, 1)}


def update(model, optimizer: torch.optim.Optimizer, batch, chosen: Levers) -> None:
    """One optimizer update as train/loop.py makes it (bf16 autocast, the fused label-smoothed loss, Adam),
    with the levers `chosen`; today's path reads the loss back, as the loop did."""
    from tnmt.train.loss import CPU_BLOCKS, GPU_BLOCKS, model_loss

    def attention() -> AbstractContextManager:  # the backward pass runs attention's backward kernels too
        return nullcontext() if chosen.fused_attention else sdpa_kernel(SDPBackend.MATH)

    with attention(), torch.autocast(batch.src.device.type, dtype=torch.bfloat16):
        features = model(batch.src, batch.tgt_in, features_only=True)  # (B, T, D)
    loss, _ = model_loss(
        model,
        features,
        batch.tgt_out,
        epsilon=0.1,
        dtype=torch.bfloat16,
        n_tokens=batch.n_tgt_tokens if chosen.no_sync else None,
        blocks=GPU_BLOCKS if chosen.loss_blocks else CPU_BLOCKS,
    )
    with attention():
        (loss / batch.n_tgt_tokens).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if not chosen.no_sync:
        loss.item()


# --- loss_curve ---


def loss_curve(speed: Speed) -> dict:
    """The recipe's first updates by today's path, the new one, and today's with another seed (module docstring)."""
    sizes = speed.sizes
    common = [f"--train.device={speed.device.type}", f"--data.prepared_dir={speed.work / 'prepared'}", *sizes.curve]
    runs = {"today": [], "new": list(sizes.new_path), "today_seed_2": ["--train.seed=2"]}
    result: dict = {"updates": CURVE_UPDATES if not speed.dry_run else None, "flags": {"common": common, **runs}}
    curves = {}
    for name, flags in runs.items():
        out = speed.work / f"curve_{name}"
        command = [*TNMT, "train", str(RECIPE), f"--train.out_dir={out}", *common, *flags, "--no-progress"]
        _, seconds = child(command, timeout=900)
        log = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        curves[name] = {r["step"]: r["train_loss"] for r in log if "train_loss" in r}
        validation = [r for r in log if "val_loss" in r]
        speeds = [r["tokens_per_s"] for r in log if "tokens_per_s" in r][1:]  # the first window holds compilation
        result[name] = {
            "wall_s": round(seconds, 1),
            "train_loss": curves[name],
            "val_loss": round(validation[-1]["val_loss"], 4) if validation else None,
            "median_target_tokens_per_s": round(statistics.median(speeds)) if speeds else None,
        }
    result["new_vs_today"] = curve_difference(curves["today"], curves["new"])
    result["seed_2_vs_today"] = curve_difference(curves["today"], curves["today_seed_2"])
    noise = result["seed_2_vs_today"]["max_abs"]
    result["new_within_seed_noise"] = result["new_vs_today"]["max_abs"] <= noise
    return result


def curve_difference(a: dict[int, float], b: dict[int, float]) -> dict:
    """How far curve b lies from curve a over their common logged updates: the largest and mean absolute
    difference of the per-token loss, and the largest relative one."""
    steps = sorted(set(a) & set(b))
    if not steps:
        raise RuntimeError("the runs logged no common update")
    diffs = [abs(a[s] - b[s]) for s in steps]
    return {
        "points": len(steps),
        "max_abs": round(max(diffs), 4),
        "mean_abs": round(statistics.mean(diffs), 4),
        "max_rel": round(max(d / abs(a[s]) for d, s in zip(diffs, steps, strict=True)), 4),
    }


# --- the run ---

SECTIONS: dict[str, Callable[[Speed], dict]] = {"levers": levers, "loss_curve": loss_curve, "big_shape": big_shape}


def parse_args() -> argparse.Namespace:
    default_data = Path(os.environ.get("TNMT_DATA_DIR") or REPO.parent / "shared" / "data" / "multi30k")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON to write")
    parser.add_argument("--data", type=Path, default=default_data, help=f"Multi30k (default: {default_data})")
    parser.add_argument("--dry-run", action="store_true", help="every section on the CPU at tiny sizes")
    parser.add_argument("--work", type=Path, help="keep the runs and logs here (default: a temporary folder)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated, run in this order")
    args = parser.parse_args()
    args.sections = args.sections.split(",")
    if unknown := [name for name in args.sections if name not in SECTIONS]:
        parser.error(f"unknown sections {unknown}; sections: {', '.join(SECTIONS)}")
    return args


def main() -> int:
    args = parse_args()
    if not args.dry_run and not torch.cuda.is_available():
        print(NO_GPU.replace("gpu_check", "gpu_speed"), file=sys.stderr)
        return 2
    os.environ["TNMT_DATA_DIR"] = str(args.data.resolve())  # the children's Multi30k
    if args.dry_run:  # a shared 2-core machine: tiny work needs no second thread
        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report: dict = {"command": " ".join(sys.argv), "dry_run": args.dry_run, "commit": commit()}
    report |= {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), "sections": {}}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu_speed-") as scratch:
        work = (args.work or Path(scratch)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        speed = Speed(dry_run=args.dry_run, data=args.data.resolve(), work=work)
        for i, name in enumerate(args.sections, 1):
            result = report["sections"][name] = guarded(partial(SECTIONS[name], speed))
            report["seconds"] = round(time.monotonic() - start, 1)
            args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            failure = f": {result['error']}" if result["status"] != "ok" else ""
            line = f"gpu_speed: [{i}/{len(args.sections)}] {name}: {result['status']} in {result['seconds']} s{failure}"
            print(line, file=sys.stderr)
    failed = [name for name, section in report["sections"].items() if section["status"] != "ok"]
    outcome = f"failed: {', '.join(failed)}" if failed else "all sections ok"
    print(f"gpu_speed: wrote {args.out} in {report['seconds']} s; {outcome}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
