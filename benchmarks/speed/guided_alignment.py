"""What guided alignment costs (issue 40): aligning the corpus when it is prepared, and each training update.

    python -m benchmarks.speed.guided_alignment [--device cpu|cuda] [--threads 2] [--updates 30] [--out FILE]
        [OVERRIDES]

Starts a real run of configs/multi30k_en_de.toml with `train.guided_alignment = 0.05` (`start_run`: the
prepare aligns Multi30k's 29k training pairs with eflomal, data/alignment.py), then times updates of the
training loop (train/update.py's `_update`, with its batches' alignment matrices) with the option off and on,
alternating on the same batches, so that background load hits both alike. The off updates run exactly the code of a run
without the option (the alignment matrix is built but not read: its cost is in `collate_ms`). Reports the
prepare's alignment seconds, the median and quartiles of each setting's target tokens/s per update, and the
ratio of the medians, to
benchmarks/results/guided_alignment[_cuda].json. Recipe overrides after the options (a smaller corpus for a
smoke run: --data.max_train_pairs=2000 --data.vocab_size=1000) go to the recipe as OVERRIDES.
"""

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.common.host import describe
from tnmt.data.batching import TokenBatchSampler, collate
from tnmt.device import mixed_precision, resolve_device, to_device
from tnmt.recipe import load_recipe
from tnmt.train import update
from tnmt.train.distributed import process_group
from tnmt.train.start import start_run

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "multi30k_en_de.toml"
WEIGHT = 0.05  # Garg et al.'s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--updates", type=int, default=30, help="timed updates of each setting")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args, args.overrides = parser.parse_known_args()
    torch.set_num_threads(args.threads)
    suffix = "_cuda" if args.device == "cuda" else ""
    out = args.out or ROOT / "benchmarks" / "results" / f"guided_alignment{suffix}.json"
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(Path(tmp), args)
    result["host"] = {**describe(), "threads": args.threads}
    if args.device == "cuda":
        result["host"]["gpu"] = torch.cuda.get_device_name()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def measure(tmp: Path, args: argparse.Namespace) -> dict:
    overrides = [f"--train.out_dir={tmp}", f"--train.guided_alignment={WEIGHT}", f"--train.device={args.device}"]
    overrides += args.overrides
    guided = load_recipe(str(RECIPE), overrides)
    device = resolve_device(args.device, local_rank=0)
    precision = mixed_precision(guided.train.precision, device)
    started = time.monotonic()
    with process_group(device=device, timeout_s=60.0) as world:
        run = start_run(guided, resume=False, progress=False, world=world, device=device, precision=precision)
    prepared = {
        "pairs": len(run.train_data),
        "alignments": run.train_data.manifest["alignments"],
        "start_run_s": round(time.monotonic() - started, 1),  # tokenizer, encoding, alignment, model
    }
    data, settings = run.train_data, {"on": run.recipe}
    settings["off"] = replace(run.recipe, train=replace(run.recipe.train, guided_alignment=0.0))
    batches = TokenBatchSampler(data.lengths(), max_tokens=guided.train.max_tokens, seed=1).batches(0)
    rates: dict[str, list[float]] = {"off": [], "on": []}  # target tokens/s of each timed update
    collate_s: dict[str, list[float]] = {"with": [], "without": []}
    run.model.train()
    for i, indices in enumerate(batches[: args.warmup + args.updates]):
        begun = time.perf_counter()
        collate(data.pairs(indices), **run.tokenizer.special_ids)
        collate_s["without"].append(time.perf_counter() - begun)
        begun = time.perf_counter()
        batch = collate(data.pairs(indices), **run.tokenizer.special_ids, links=data.links(indices))
        collate_s["with"].append(time.perf_counter() - begun)
        batch = to_device(batch, device)
        for name in ("off", "on") if i % 2 else ("on", "off"):  # alternate which goes first
            run.recipe = settings[name]
            begun = time.perf_counter()
            update._update(run, [batch], real=1, steps=1)  # its .item() calls wait for the GPU
            if i >= args.warmup:
                rates[name].append(batch.n_tgt_tokens / (time.perf_counter() - begun))
    # medians of per-update rates: one slow update (a GPU kernel compiled on first use) does not move them
    medians = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "recipe": f"{RECIPE.relative_to(ROOT)} + train.guided_alignment = {WEIGHT}",
        "device": str(device),
        "precision": str(precision.dtype) if precision.dtype else "fp32",
        "prepare": prepared,
        "updates": args.updates,
        "target_tokens_per_s_median": {name: round(value) for name, value in medians.items()},
        "target_tokens_per_s_quartiles": {
            name: [round(q) for q in statistics.quantiles(v)[::2]] for name, v in rates.items()
        },
        "on_over_off": round(medians["on"] / medians["off"], 3),
        "collate_ms_median": {f"{k}_alignment": round(1000 * statistics.median(v), 2) for k, v in collate_s.items()},
    }


if __name__ == "__main__":
    main()
