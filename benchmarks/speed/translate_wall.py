"""Wall time of `tnmt translate` on a real test set, start-up and loading included, per engine and thread count.

    python -m benchmarks.speed.translate_wall --checkpoint outputs/bench_multi30k_en_de/best [--baseline ../wt-base]
        [--engines tnmt,ctranslate2] [--threads 1,2]

Issue 13's target: test_2016_flickr (1000 sentences), the 45-minute Multi30k model, beam 4, <= 3 s from
launch to exit. Each run times `python -m tnmt translate --checkpoint CKPT -i test_2016_flickr.en.gz -o OUT
--engine E --threads T` as a child process, then the same command on a one-line input: that is the start-up
(Python, torch and tnmt imports, loading the model and tokenizer, one short sentence), and the difference is
what the 1000 sentences cost. Every engine runs at every thread count of `--threads` (0: the engine's
default); the children run without OMP_NUM_THREADS, so the flag alone decides. For `ctranslate2` the
checkpoint is first exported (`tnmt export ctranslate2`, untimed). Issue 54: on a 2-vCPU Xeon, CTranslate2
at its default of 2 threads took 13.1 s and at 1 thread 5.3 s, which only a flag lets a user choose.

With `--baseline DIR` the same commands also run from DIR/src (a `git worktree` of the commit before a change;
it must know `--threads`), every configuration of both checkouts taking turns run by run, so background load
hits all alike; the report gives each one's medians, each configuration's ratio of the full runs' medians,
and how many output lines differ from the baseline's (a speed-up that changes translations must say so).
Every system's output is also compared with the first one's (the first engine at the first thread count).
Results: benchmarks/results/translate_wall.json (`--out`).
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
from benchmarks.speed.translate_file import data_dir, timed

ROOT = Path(__file__).resolve().parents[2]


def translate(checkout: Path, model: Path, engine: str, threads: int, beam_size: int, source: Path, out: Path) -> dict:
    """One `tnmt translate` of `source` from `checkout`'s code, timed."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(checkout / "src")
    command = [sys.executable, "-m", "tnmt", "translate", "--checkpoint", str(model), "--engine", engine]
    command += ["--threads", str(threads), "--beam-size", str(beam_size), "-i", str(source), "-o", str(out)]
    return timed(command, env)


def export(checkpoint: Path, out: Path) -> Path:
    """The CTranslate2 model of `checkpoint`, written by this checkout's `tnmt export ctranslate2`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "tnmt", "export", "ctranslate2", str(checkpoint), "--out", str(out)]
    subprocess.run(command, env=env, check=True, capture_output=True)
    return out


def differing(lines: list[str], others: list[str]) -> int:
    return sum(a != b for a, b in zip(lines, others, strict=True))


def summary(runs: list[dict], sentences: int) -> dict:
    return {
        "median_wall_s": statistics.median(r["full"]["wall_s"] for r in runs),
        "median_start_up_s": statistics.median(r["start_up"]["wall_s"] for r in runs),
        "sentences_per_s_after_start_up": sentences
        / statistics.median(r["full"]["wall_s"] - r["start_up"]["wall_s"] for r in runs),
        "runs": runs,
    }


def measure(
    checkouts: dict[str, Path], configs: list[tuple[str, int]], args: argparse.Namespace, source: Path
) -> tuple[dict[str, list[dict]], dict[str, list[str]]]:
    """Every system's timed runs and its output lines; a system is a checkout's engine at a thread count, named
    "ctranslate2@1" ("base ctranslate2@1" for the baseline's). The systems take turns within each run."""
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="tnmt-translate-wall-") as tmp:
        work = Path(tmp)
        models = {"tnmt": args.checkpoint}
        if any(engine == "ctranslate2" for engine, _ in configs):
            models["ctranslate2"] = export(args.checkpoint, work / "ct2")
        one_line = work / "one_line.en"
        one_line.write_text("A man is sleeping.\n", encoding="utf-8")
        for checkout in checkouts.values():  # untimed: warms the page cache
            for engine, threads in configs:
                translate(checkout, models[engine], engine, threads, args.beam_size, one_line, work / "warm")
        for i in range(args.runs):
            for engine, threads in configs:
                for prefix, checkout in checkouts.items():
                    name = f"{prefix}{engine}@{threads}"
                    command = (checkout, models[engine], engine, threads, args.beam_size)
                    full = translate(*command, source, work / f"{name}.out")
                    start_up = translate(*command, one_line, work / f"{name}.one")
                    runs.setdefault(name, []).append({"full": full, "start_up": start_up})
                    line = f"{name} run {i + 1}: {full['wall_s']:.2f} s ({start_up['wall_s']:.2f} s start-up)"
                    print(line, file=sys.stderr)
        return runs, {name: (work / f"{name}.out").read_text(encoding="utf-8").splitlines() for name in runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--baseline", type=Path, help="another tnmt checkout, run as `base`")
    parser.add_argument("--input", type=Path, help="default: test_2016_flickr.en.gz of Multi30k")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--engines", default="tnmt", help="comma-separated: tnmt, ctranslate2")
    parser.add_argument("--threads", default="2", help="comma-separated --threads of tnmt translate (0: default)")
    parser.add_argument("--runs", type=int, default=5, help="runs of every system")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "translate_wall.json")
    args = parser.parse_args()
    source = args.input or data_dir() / "test_2016_flickr.en.gz"
    checkouts = {"": ROOT} | ({"base ": args.baseline.resolve()} if args.baseline else {})
    configs = [(e, int(t)) for e in args.engines.split(",") for t in args.threads.split(",")]
    runs, outputs = measure(checkouts, configs, args, source)
    first = next(iter(outputs.values()))
    sentences = len(first)
    report = {
        "command": " ".join(["python -m benchmarks.speed.translate_wall", *sys.argv[1:]]),
        "machine": describe(),
        "checkpoint": str(args.checkpoint),
        "input": str(source),
        "sentences": sentences,
        "beam_size": args.beam_size,
        "engines": args.engines.split(","),
        "threads": [int(t) for t in args.threads.split(",")],
        "baseline": None if args.baseline is None else str(args.baseline),
        "systems": {name: summary(rs, sentences) for name, rs in runs.items()},
        "lines_differing_from_first": {name: differing(out, first) for name, out in outputs.items()},
    }
    if args.baseline:
        walls = {name: system["median_wall_s"] for name, system in report["systems"].items()}
        mine = [f"{engine}@{threads}" for engine, threads in configs]
        report["speedup"] = {name: walls[f"base {name}"] / walls[name] for name in mine}
        report["lines_differing_from_base"] = {name: differing(outputs[name], outputs[f"base {name}"]) for name in mine}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| system | wall s (median) | start-up s | sentences/s after it | lines differing from the first |")
    print("| --- | --- | --- | --- | --- |")
    for name, system in report["systems"].items():
        print(
            f"| {name} | {system['median_wall_s']:.2f} | {system['median_start_up_s']:.2f} |"
            f" {system['sentences_per_s_after_start_up']:.0f} | {report['lines_differing_from_first'][name]} |"
        )
    for name, speedup in report.get("speedup", {}).items():
        changed = report["lines_differing_from_base"][name]
        print(f"{name}: speed-up {speedup:.3f}x over base; {changed} of {sentences} lines differ")


if __name__ == "__main__":
    main()
