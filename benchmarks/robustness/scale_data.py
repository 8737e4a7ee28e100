"""Data at scale (issue 10, section 1): `tnmt prepare` and training start on a WMT-sized corpus.

The corpus: `--pairs` (default 4.5M, WMT14 en-de's size) synthetic pairs recombined from Multi30k en-de
train: each joins 2 or 3 random Multi30k pairs, the same ones on both sides, so the lines differ, the
text is not one file repeated, and sentence lengths (~35 words) are WMT-like. Written once as plain
text under `--work` and reused.

Every figure comes from a fresh subprocess, so one measurement's memory never counts in another's:

- prepare: `tnmt prepare` on the corpus: wall time and peak RSS of the process tree (the sum over the
  process and its encoding workers, sampled every 50 ms from /proc).
- train (prepared): `tnmt train` on the prepared corpus (the recipe's model, `--updates` + 1 updates,
  `log_every = 1`): time from launch to the first update (the first line of metrics.jsonl), RSS then,
  peak RSS while training (`peak_rss_training_mb`; `peak_rss_mb` adds the final validation and plots),
  that peak beyond the model and Adam (4 x the fp32 weights: weights, gradients, two moments; the rest
  is the Python + torch runtime and the data), and target tokens/s over the last `--updates` updates
  (the first one warms up).
- train (in memory): the same for today's in-memory path (`read_split` + `train_tokenizer` on all the
  text + `encode` + `EncodedPairs`) at `--baseline-pairs` (default 0.5M), run by this script itself
  (`--in-memory-train`) with `tnmt.train.start.prepare_recipe` swapped for that path.
- Multi30k: tokens/s of the Multi30k recipe from the prepared corpus and in memory, side by side:
  `--repeats` runs of each, alternating, and the median of the per-pair ratios (a 50-update run on a
  shared 2-core host varies by more than the 3% measured).
- data path: what the two paths differ in, alone: reading each batch's sentences (`pairs(indices)`) from
  the prepared Multi30k corpus and from the same ids held in lists, batch by batch, alternating, over
  `--repeats` epochs in one process; the median per batch, set against the mean training step (a batch's
  target tokens over the median tokens/s of the prepared runs above).

Targets (issue 10, on the 2-core machine): prepare 4.5M pairs <= 10 min with peak RSS <= 2 GB; training
start <= 30 s; training RSS beyond model and optimizer <= 1 GB; Multi30k tokens/s within 3% of the
in-memory path.

    python -m benchmarks.robustness.scale_data [--pairs 4500000] [--baseline-pairs 500000] [--repeats 3] [--quick]
        [--work DIR]
"""

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common.host import describe

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's tnmt, in this process as in the runs it starts
RECIPE = ROOT / "configs" / "multi30k_en_de.toml"
TARGETS = {"prepare_s": 600, "prepare_peak_rss_mb": 2048, "time_to_first_update_s": 30, "rss_beyond_mb": 1024}


def multi30k_dir() -> Path:
    return Path(os.environ.get("TNMT_DATA_DIR", ROOT.parent / "shared" / "data" / "multi30k"))


def synthetic_corpus(work: Path, pairs: int, seed: int = 0) -> tuple[Path, Path]:
    """`pairs` recombined Multi30k pairs as plain text (written once, then reused)."""
    from tnmt.data.corpus import read_lines

    src, tgt = work / f"synthetic_{pairs}.en", work / f"synthetic_{pairs}.de"
    if src.exists() and tgt.exists():
        return src, tgt
    en, de = (read_lines(multi30k_dir() / f"train.{lang}.gz") for lang in ("en", "de"))
    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    with open(f"{src}.tmp", "w", encoding="utf-8") as fs, open(f"{tgt}.tmp", "w", encoding="utf-8") as ft:
        for _ in range(pairs):
            picks = rng.sample(range(len(en)), rng.choice((2, 3)))
            fs.write(" ".join(en[i] for i in picks) + "\n")
            ft.write(" ".join(de[i] for i in picks) + "\n")
    os.replace(f"{src}.tmp", src)
    os.replace(f"{tgt}.tmp", tgt)
    return src, tgt


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants (0 once it is gone)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/status") as f:
                total += next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as f:
                    stack.extend(int(child) for child in f.read().split())
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
    return total


def run(command: list[str], *, metrics: Path | None = None, updates: int = 0, timeout: float = 7200) -> dict:
    """Run `command`, sampling the RSS of its process tree. With `metrics` (a training run's metrics.jsonl,
    one line per update), also: when the first update was logged, the RSS then, and the peak RSS until
    update `updates` + 1 was logged (training only: the final validation and plots come after)."""
    env = {
        "TNMT_DATA_DIR": str(multi30k_dir()),
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    }
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, logged, result = 0, 0, {}
    while process.poll() is None:
        rss = tree_rss(process.pid)
        peak = max(peak, rss)
        if metrics is not None and logged <= updates and metrics.exists():
            logged = len(metrics.read_text().splitlines())
            if logged and "time_to_first_update_s" not in result:
                result["time_to_first_update_s"] = round(time.monotonic() - started, 2)
                result["rss_at_first_update_mb"] = round(rss / 2**20, 1)
            if logged > updates:
                result["peak_rss_training_mb"] = round(peak / 2**20, 1)
        if time.monotonic() - started > timeout:
            process.kill()
        time.sleep(0.05)
    _, err = process.communicate()
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{err[-3000:]}")
    return {"wall_s": round(time.monotonic() - started, 2), "peak_rss_mb": round(peak / 2**20, 1), **result}


def training_figures(out: Path, updates: int) -> dict:
    """Target tokens/s over the last `updates` updates, and the model + Adam memory, from the run's files."""
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "train_loss" in r][-updates - 1 :]
    tokens = sum(r["tokens_per_s"] * (r["elapsed"] - before["elapsed"]) for before, r in itertools.pairwise(steps))
    weights = (out / "last" / "model.safetensors").resolve().stat().st_size
    return {
        "tokens_per_s": round(tokens / (steps[-1]["elapsed"] - steps[0]["elapsed"]), 1),
        "model_optimizer_mb": round(4 * weights / 2**20, 1),
    }


def train(name: str, overrides: list[str], out: Path, *, updates: int, in_memory: bool) -> dict:
    command = [sys.executable, *(["-m", "tnmt"] if not in_memory else ["-m", __spec__.name, "--in-memory-train"])]
    settings = [f"--train.out_dir={out}", f"--train.max_steps={updates + 1}", "--train.log_every=1"]
    settings += ["--train.eval_every=0", "--train.eval_beam_size=1", "--data.max_valid_pairs=100"]
    command = [*command, "train", str(RECIPE), *overrides, *settings, "--no-progress"]
    result = run(command, metrics=out / "metrics.jsonl", updates=updates)
    result.update(training_figures(out, updates))
    beyond = result["peak_rss_training_mb"] - result["model_optimizer_mb"]
    result["rss_beyond_model_optimizer_mb"] = round(beyond, 1)
    print(f"{name}: {result}", flush=True)
    return result


def files(src: Path, tgt: Path, pairs: int) -> list[str]:
    valid = multi30k_dir()
    return [
        "--data.corpus=files",
        f"--data.train_src={src}",
        f"--data.train_tgt={tgt}",
        f"--data.valid_src={valid / 'val.en.gz'}",
        f"--data.valid_tgt={valid / 'val.de.gz'}",
        f"--data.max_train_pairs={pairs}",
    ]


def in_memory_train(argv: list[str]) -> int:
    """`tnmt train` with today's in-memory data path instead of a prepared corpus."""
    from tnmt.cli import main
    from tnmt.data.dataset import EncodedPairs, encode, read_split, train_tokenizer
    from tnmt.train import start

    class InMemory(EncodedPairs):
        def __init__(self, src: list, tgt: list, tokenizer) -> None:
            super().__init__(src=src, tgt=tgt)
            self._tokenizer = tokenizer

        def tokenizer(self):
            return self._tokenizer

    def in_memory_data(recipe, *, tokenizer, model_max_len):
        text = read_split(recipe.data, "train", limit=recipe.data.max_train_pairs)
        tokenizer = tokenizer or train_tokenizer(recipe.data, text)
        data = encode(text, tokenizer, max_len=recipe.longest_side(model_max_len))
        return InMemory(data.src, data.tgt, tokenizer)

    start.prepare_recipe = in_memory_data
    return main(argv)


def multi30k_side_by_side(work: Path, *, updates: int, repeats: int) -> dict:
    """The Multi30k recipe's tokens/s from its prepared corpus and in memory, `repeats` times each, alternating."""
    runs: dict[str, list[dict]] = {"prepared": [], "in_memory": []}
    for _ in range(repeats):
        for mode, results in runs.items():
            out = work / f"multi30k_{mode}"
            subprocess.run(["rm", "-rf", str(out)], check=True)
            if mode == "prepared":  # prepare first, so that only training is timed
                run([sys.executable, "-m", "tnmt", "prepare", str(RECIPE), f"--train.out_dir={out}"])
            results.append(train(f"multi30k ({mode})", [], out, updates=updates, in_memory=mode == "in_memory"))
    ratios = [p["tokens_per_s"] / m["tokens_per_s"] for p, m in zip(runs["prepared"], runs["in_memory"], strict=True)]
    ratio = round(statistics.median(ratios), 4)
    return {**runs, "prepared_vs_in_memory": [round(r, 4) for r in ratios], "median_ratio": ratio}


def data_path_side_by_side(prepared_dir: Path, *, repeats: int, tokens_per_s: float) -> dict:
    """Milliseconds to read one batch's sentences from the prepared corpus and from lists, alternating.

    The end-to-end runs compare whole training processes, whose speed on a shared host moves by more than
    the difference sought; this times only the code in which the two paths differ, in one process.
    """
    from tnmt.data.batching import TokenBatchSampler
    from tnmt.data.dataset import EncodedPairs
    from tnmt.data.prepared import PreparedPairs
    from tnmt.recipe import load_recipe

    train_config = load_recipe(RECIPE).train
    prepared = PreparedPairs(prepared_dir)
    everything = prepared.pairs(range(len(prepared)))
    in_memory = EncodedPairs(src=[s for s, _ in everything], tgt=[t for _, t in everything])
    sampler = TokenBatchSampler(prepared.lengths(), max_tokens=train_config.max_tokens, seed=train_config.seed)
    times: dict[str, list[float]] = {"prepared": [], "in_memory": []}
    for epoch in range(repeats):
        for indices in sampler.batches(epoch):
            indices = indices.tolist()
            for mode, data in (("prepared", prepared), ("in_memory", in_memory)):
                started = time.perf_counter()
                data.pairs(indices)
                times[mode].append(time.perf_counter() - started)
    target_tokens = sum(len(t) + 1 for t in in_memory.tgt) / len(sampler)  # per batch, EOS included
    step_ms = 1000 * target_tokens / tokens_per_s  # the mean training step of the prepared runs
    result = {mode: round(1000 * statistics.median(t), 3) for mode, t in times.items()}
    extra = result["prepared"] - result["in_memory"]
    result |= {"batches": len(times["prepared"]), "step_ms": round(step_ms, 1)}
    result["extra_share_of_step"] = round(extra / step_ms, 5)
    print(f"data path (ms per batch): {result}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=4_500_000)
    parser.add_argument("--baseline-pairs", type=int, default=500_000, help="pairs of the in-memory baseline")
    parser.add_argument("--updates", type=int, default=50, help="updates timed for tokens/s")
    parser.add_argument("--repeats", type=int, default=3, help="Multi30k runs of each path, alternating")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20k pairs, 5k baseline, 10 updates, 1 repeat")
    parser.add_argument("--work", type=Path, default=Path("outputs/scale_data"))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scale_data.json")
    args = parser.parse_args()
    if args.quick:
        args.pairs, args.baseline_pairs, args.updates, args.repeats = min(args.pairs, 20_000), 5_000, 10, 1
    baseline_pairs = min(args.baseline_pairs, args.pairs)
    started = time.monotonic()
    src, tgt = synthetic_corpus(args.work, args.pairs)
    print(f"corpus: {args.pairs} pairs in {src}, {tgt} ({time.monotonic() - started:.0f} s)", flush=True)
    results: dict = {"pairs": args.pairs, "baseline_pairs": baseline_pairs, "updates": args.updates, "targets": TARGETS}

    big = files(src, tgt, args.pairs)
    out = args.work / "prepared_run"
    command = [sys.executable, "-m", "tnmt", "prepare", str(RECIPE), *big, f"--train.out_dir={out}"]
    subprocess.run(["rm", "-rf", str(out)], check=True)
    results["prepare"] = run(command)
    print(f"prepare: {results['prepare']}", flush=True)
    results["train_prepared"] = train("train (prepared)", big, out, updates=args.updates, in_memory=False)
    small = files(src, tgt, baseline_pairs)
    out = args.work / "in_memory_run"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    results["train_in_memory"] = train("train (in memory)", small, out, updates=args.updates, in_memory=True)

    results["multi30k"] = multi30k_side_by_side(args.work, updates=args.updates, repeats=args.repeats)
    median_speed = statistics.median(figures["tokens_per_s"] for figures in results["multi30k"]["prepared"])
    prepared_dir = args.work / "multi30k_prepared" / "prepared"
    results["data_path"] = data_path_side_by_side(prepared_dir, repeats=args.repeats, tokens_per_s=median_speed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": describe(), **results}, indent=2) + "\n")
    print(f"wrote {args.out} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--in-memory-train"]:
        sys.exit(in_memory_train(sys.argv[2:]))
    main()
