"""Updates per minute of `tnmt train` on a real recipe, against another checkout (issue 13).

`train_speed.py` times one synthetic step shape against other libraries; this one times what a user
runs: `python -m tnmt train RECIPE` for a fixed number of updates, its own batches, data loading,
clipping, schedule and EMA included, and reads the speed the loop logs (target tokens/s and seconds per
update over the log windows after the first). With `--baseline DIR` the same command runs from another
checkout (DIR/src on PYTHONPATH, e.g. a `git worktree` of the commit before a change), the two taking
turns run by run, so a burst of background load hits both alike; the ratio is taken per pair of
neighbouring runs and reported as the median with its range. Both read one prepared corpus (prepared
once, before the timed runs) and start from the same seed, so their training losses at the same update
must agree too: the report puts them side by side (a speed-up that changes the curve is not one).

    python -m benchmarks.speed.train_recipe --baseline ../wt-base                      # Multi30k en->de, 3 runs each
    python -m benchmarks.speed.train_recipe --recipe configs/multi30k_en_de.toml --steps 300 --runs 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common.host import describe

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "train_recipe.json"


def run(checkout: Path, recipe: Path, out: Path, prepared: Path, *, steps: int, log_every: int) -> list[dict]:
    """One `tnmt train` from `checkout`; returns its training log rows (metrics.jsonl)."""
    overrides = [
        f"--train.out_dir={out}",
        f"--data.prepared_dir={prepared}",
        f"--train.max_steps={steps}",
        "--train.max_minutes=0",
        f"--train.eval_every={steps}",  # one validation, after the last timed window
        f"--train.log_every={log_every}",
        "--train.average_last=0",
    ]
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    command = [sys.executable, "-m", "tnmt", "train", "--no-progress", str(recipe), *overrides]
    subprocess.run(command, env=env, check=True, cwd=checkout, stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if "train_loss" in row]


def speed(rows: list[dict]) -> dict:
    """Tokens/s and seconds per update over the windows after the first (which holds start-up effects)."""
    timed = rows[1:]
    seconds = timed[-1]["elapsed"] - rows[0]["elapsed"]
    updates = timed[-1]["step"] - rows[0]["step"]
    return {
        "tokens_per_s": statistics.median(row["tokens_per_s"] for row in timed),
        "s_per_update": seconds / updates,
        "updates_per_min": 60 * updates / seconds,
        "train_loss": {row["step"]: round(row["train_loss"], 4) for row in rows},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", type=Path, default=ROOT / "configs" / "multi30k_en_de.toml")
    parser.add_argument("--baseline", type=Path, help="another tnmt checkout, run as `base`")
    parser.add_argument("--steps", type=int, default=200, help="updates per run")
    parser.add_argument("--log-every", type=int, default=25, help="updates per speed window")
    parser.add_argument("--runs", type=int, default=3, help="runs per checkout")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.steps < 3 * args.log_every:
        parser.error("--steps must cover at least 3 windows of --log-every updates")
    checkouts = {"tnmt": ROOT} | ({"base": args.baseline.resolve()} if args.baseline else {})
    recipe = args.recipe.resolve()
    runs: dict[str, list[dict]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="tnmt-train-recipe-") as tmp:
        work = Path(tmp)
        prepared = work / "prepared"
        for name, checkout in checkouts.items():  # untimed: prepares the corpus, warms the page cache
            run(checkout, recipe, work / f"warm-{name}", prepared, steps=args.log_every, log_every=args.log_every)
        for i in range(args.runs):
            for name, checkout in checkouts.items():
                rows = run(checkout, recipe, work / f"{name}-{i}", prepared, steps=args.steps, log_every=args.log_every)
                runs[name].append(speed(rows))
                print(f"{name} run {i + 1}: {runs[name][-1]['updates_per_min']:.1f} updates/min", file=sys.stderr)
    report = {
        "machine": describe(),
        "recipe": str(args.recipe),
        "steps": args.steps,
        "baseline": None if args.baseline is None else str(args.baseline),
        "systems": {
            name: {
                "updates_per_min": statistics.median(r["updates_per_min"] for r in rs),
                "tokens_per_s": statistics.median(r["tokens_per_s"] for r in rs),
                "runs": rs,
            }
            for name, rs in runs.items()
        },
    }
    if args.baseline:
        pairs = list(zip(runs["tnmt"], runs["base"], strict=True))
        ratios = sorted(a["updates_per_min"] / b["updates_per_min"] for a, b in pairs)
        report["speedup"] = {"median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1]}
        report["max_train_loss_difference"] = max(
            abs(a["train_loss"][k] - b["train_loss"][k]) for a, b in pairs for k in a["train_loss"]
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for name, system in report["systems"].items():
        print(f"{name}: {system['updates_per_min']:.1f} updates/min, {system['tokens_per_s']:.0f} target tokens/s")
    if args.baseline:
        s = report["speedup"]
        print(
            f"speed-up: {s['median']:.3f}x (range {s['min']:.3f}-{s['max']:.3f}); largest train-loss difference "
            f"at the same update: {report['max_train_loss_difference']:.4f}"
        )


if __name__ == "__main__":
    main()
