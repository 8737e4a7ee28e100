"""Levers at equal updates: recipe variants trained side by side to the same number of updates, each scored on
Multi30k's test_2016_flickr in its first direction.

`benchmarks.quality.multi30k` measures a recipe against the clock on one host; this script screens variants per
update, which is what the clock buys on any host (the 45-minute budget is ~3,800-4,400 updates on a 2-vCPU host
without AMX and ~8,800 with it). Every arm has the same update budget, so a lever's schedule (bidirectional
training's switch, a share of the budget) lands where it would in a timed run of that many updates. On a GPU the
arms train at once (`--parallel`: a small model leaves most of the chip idle); on a CPU run them one at a time.

    python -m benchmarks.quality.levers --steps 8800 --seeds 1 2 --parallel 8 \
        --arm base --arm bi --set 'bi:data.languages=["en","de"]' --set 'bi:data.directions=["en-de","de-en"]' \
        --set bi:data.first_direction_from=0.33 --result benchmarks/results/levers.json

An arm is a name: alone it trains the recipe; `--set NAME:KEY=VALUE` (repeatable) adds an override to arm NAME,
and `--set KEY=VALUE` one to every arm. Each arm trains with `tnmt train` in its own process (so a stuck arm is
stopped at `--deadline-minutes` with SIGTERM, which saves its last update), then its best checkpoint is scored
(greedy and beam 4, sacreBLEU and the tokenised lower-cased BLEU of the literature) by another process.
"""

import argparse
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from benchmarks.common.host import describe
from benchmarks.quality.multi30k import evaluate_checkpoint, test_set
from tnmt.config import DataConfig, parse
from tnmt.data.multi30k import find_multi30k
from tnmt.train.run_dir import RunDir

REPO = Path(__file__).resolve().parents[2]


def arm_overrides(names: list[str], sets: list[str]) -> dict[str, list[str]]:
    """Each arm's recipe overrides, from `--set NAME:KEY=VALUE` items (`KEY=VALUE` alone applies to every arm)."""
    arms: dict[str, list[str]] = {name: [] for name in names}
    for item in sets:
        name, sep, override = item.partition(":")
        if not sep or "=" in name:
            for overrides in arms.values():
                overrides.append(item)
            continue
        if name not in arms:
            raise SystemExit(f"--set {item}: no arm named {name!r} (arms: {', '.join(names)})")
        arms[name].append(override)
    return arms


def train_command(recipe: str, overrides: list[str], steps: int, seed: int, out: Path) -> list[str]:
    """`tnmt train` to exactly `steps` updates (no clock budget: shares of the budget count updates)."""
    fixed = [f"train.max_steps={steps}", "train.max_minutes=0", f"train.seed={seed}", f"train.out_dir={out}"]
    return [sys.executable, "-m", "tnmt.cli", "train", recipe, "--no-progress", *(f"--{o}" for o in overrides + fixed)]


def run_all(commands: list[tuple[str, list[str], Path]], parallel: int, deadline_s: float) -> dict[str, int]:
    """Run the commands, `parallel` at a time, each logging to its `log`; SIGTERM those still running at the
    deadline (training saves its last update and exits). Returns each name's exit status."""
    waiting, running, status, stopping = list(commands), {}, {}, set()
    start = time.monotonic()
    while waiting or running:
        while waiting and len(running) < parallel:
            name, command, log = waiting.pop(0)
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("w") as out:  # the child keeps its own copy of the descriptor
                running[name] = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        for name, process in list(running.items()):
            if process.poll() is not None:
                status[name] = process.returncode
                del running[name]
            elif time.monotonic() - start > deadline_s and name not in stopping:
                process.send_signal(signal.SIGTERM)
                stopping.add(name)
        time.sleep(1.0)
    return status


def curve(records: list[dict]) -> list[dict]:
    """A run's validations (its metrics.jsonl records): update, BLEU (greedy), loss."""
    return [
        {"step": r["step"], "bleu": round(r["val_bleu"], 2), "loss": round(r["val_loss"], 4)}
        for r in records
        if "val_bleu" in r  # validation records carry val_loss too
    ]


def score_run(run: Path) -> dict:
    """The run's best checkpoint on test_2016_flickr in its first direction, greedy and beam 4."""
    data = parse(DataConfig, json.loads((run / "recipe.json").read_text())["data"], where=str(run / "recipe.json"))
    pair, test, tok_refs, _ = test_set(data, find_multi30k())
    return {
        f"best_{name}": {
            key: value
            for key, value in evaluate_checkpoint(run / "best", test.src, test.tgt, tok_refs, beam, pair).items()
            if key != "examples"
        }
        for name, beam in (("greedy", 1), ("beam4", 4))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default=str(REPO / "configs" / "multi30k_en_de.toml"))
    parser.add_argument("--arm", action="append", default=[], help="an arm's name (repeat)")
    parser.add_argument("--set", action="append", default=[], metavar="[ARM:]KEY=VALUE")
    parser.add_argument("--steps", type=int, default=0, help="updates for every arm")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--parallel", type=int, default=1, help="arms training at once (a GPU: several)")
    parser.add_argument("--deadline-minutes", type=float, default=0, help="stop arms still training then (0: none)")
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "levers")
    parser.add_argument("--result", type=Path, default=REPO / "benchmarks" / "results" / "levers.json")
    parser.add_argument("--score", type=Path, help=argparse.SUPPRESS)  # internal: score one run, print its JSON
    args = parser.parse_args()
    if args.score:
        print(json.dumps(score_run(args.score)))
        return
    if not args.arm or args.steps <= 0:
        parser.error("--arm (at least one) and --steps (positive) are required")
    arms = arm_overrides(args.arm, args.set)
    runs = {f"{name}_s{seed}": (name, seed) for name in arms for seed in args.seeds}
    started = time.monotonic()
    trained = run_all(
        [
            (key, train_command(args.recipe, arms[name], args.steps, seed, args.out / key), args.out / f"{key}.log")
            for key, (name, seed) in runs.items()
        ],
        args.parallel,
        args.deadline_minutes * 60 or math.inf,
    )
    train_s = time.monotonic() - started
    write_results(args, arms, runs, trained, train_s)  # the curves, in case scoring is cut short
    me = [sys.executable, "-m", "benchmarks.quality.levers", "--score"]
    best = [key for key in runs if (args.out / key / "best").exists()]
    run_all([(key, [*me, str(args.out / key)], args.out / f"{key}.score") for key in best], args.parallel, math.inf)
    results = write_results(args, arms, runs, trained, train_s)
    for key, entry in results["runs"].items():
        top = max((p["bleu"] for p in entry.get("val_curve", [])), default=None)
        test = entry.get("best_beam4", {}).get("tok_lc_bleu")
        print(f"{key}: exit {entry['exit']}, {entry.get('updates')} updates, best val {top}, test beam4 tok-lc {test}")
    print(f"wrote {args.result}")


def write_results(
    args: argparse.Namespace, arms: dict[str, list[str]], runs: dict, trained: dict, train_s: float
) -> dict:
    """Write (and return) the result JSON: every run's curve, and its test scores where they exist."""
    results = {
        "recipe": args.recipe,
        "steps": args.steps,
        "machine": {**describe(), "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
        "train_seconds": round(train_s, 1),
        "arms": arms,
        "runs": {key: run_entry(args.out, key, name, seed, trained.get(key)) for key, (name, seed) in runs.items()},
    }
    args.result.parent.mkdir(parents=True, exist_ok=True)
    args.result.write_text(json.dumps(results, indent=1) + "\n")
    return results


def run_entry(out: Path, key: str, arm: str, seed: int, exit_status: int | None) -> dict:
    """One run's record: its arm, seed, exit status, updates, validation curve and test scores."""
    entry: dict = {"arm": arm, "seed": seed, "exit": exit_status}
    if records := RunDir(out / key).records():
        entry["val_curve"] = curve(records)
        entry["updates"] = max(record["step"] for record in records)
    score = out / f"{key}.score"
    lines = score.read_text().strip().splitlines() if score.exists() else []
    try:
        entry.update(json.loads(lines[-1]))
    except (IndexError, json.JSONDecodeError):
        entry["score_error"] = "\n".join(lines[-5:])
    return entry


if __name__ == "__main__":
    main()
