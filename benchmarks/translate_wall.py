"""Wall time of `tnmt translate` on a real test set, start-up and loading included, against another checkout.

    python benchmarks/translate_wall.py --checkpoint outputs/bench_multi30k_en_de/best [--baseline ../wt-base]

Issue 13's target: test_2016_flickr (1000 sentences), the 45-minute Multi30k model, beam 4, <= 3 s from
launch to exit. Each run times `python -m tnmt translate --checkpoint CKPT -i test_2016_flickr.en.gz -o OUT`
as a child process, then the same command on a one-line input: that is the start-up (Python, torch and
tnmt imports, loading the checkpoint and tokenizer, one short sentence), and the difference is what the
1000 sentences cost. With `--baseline DIR` the same commands run from DIR/src (a `git worktree` of the
commit before a change), the checkouts taking turns run by run, so background load hits both alike; the
report gives each one's medians, the ratio of the full runs' medians, and how many output lines differ
(a speed-up that changes translations must say so). Results: benchmarks/results/translate_wall.json.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from host import describe
from translate_file import data_dir, timed

ROOT = Path(__file__).resolve().parents[1]


def translate(checkout: Path, args: argparse.Namespace, source: Path, output: Path) -> dict:
    """One `tnmt translate` of `source` from `checkout`'s code, timed."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "src"), "OMP_NUM_THREADS": str(args.threads)}
    command = [sys.executable, "-m", "tnmt", "translate", "--checkpoint", str(args.checkpoint)]
    command += ["-i", str(source), "-o", str(output), "--beam-size", str(args.beam_size)]
    return timed(command, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--baseline", type=Path, help="another tnmt checkout, run as `base`")
    parser.add_argument("--input", type=Path, help="default: test_2016_flickr.en.gz of Multi30k")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (OMP_NUM_THREADS)")
    parser.add_argument("--runs", type=int, default=5, help="runs per checkout")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "translate_wall.json")
    args = parser.parse_args()
    source = args.input or data_dir() / "test_2016_flickr.en.gz"
    checkouts = {"tnmt": ROOT} | ({"base": args.baseline.resolve()} if args.baseline else {})
    runs: dict[str, list[dict]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="tnmt-translate-wall-") as tmp:
        work = Path(tmp)
        one_line = work / "one_line.en"
        one_line.write_text("A man is sleeping.\n", encoding="utf-8")
        for checkout in checkouts.values():  # untimed: warms the page cache
            translate(checkout, args, one_line, work / "warm")
        for i in range(args.runs):
            for name, checkout in checkouts.items():
                full = translate(checkout, args, source, work / f"{name}.out")
                start_up = translate(checkout, args, one_line, work / f"{name}.one")
                runs[name].append({"full": full, "start_up": start_up})
                line = f"{name} run {i + 1}: {full['wall_s']:.2f} s ({start_up['wall_s']:.2f} s start-up)"
                print(line, file=sys.stderr)
        outputs = {name: (work / f"{name}.out").read_text(encoding="utf-8").splitlines() for name in checkouts}
    sentences = len(outputs["tnmt"])
    report = {
        "machine": describe(),
        "checkpoint": str(args.checkpoint),
        "input": str(source),
        "sentences": sentences,
        "beam_size": args.beam_size,
        "threads": args.threads,
        "baseline": None if args.baseline is None else str(args.baseline),
        "systems": {
            name: {
                "median_wall_s": statistics.median(r["full"]["wall_s"] for r in rs),
                "median_start_up_s": statistics.median(r["start_up"]["wall_s"] for r in rs),
                "sentences_per_s_after_start_up": sentences
                / statistics.median(r["full"]["wall_s"] - r["start_up"]["wall_s"] for r in rs),
                "runs": rs,
            }
            for name, rs in runs.items()
        },
    }
    if args.baseline:
        walls = {name: report["systems"][name]["median_wall_s"] for name in checkouts}
        report["speedup"] = walls["base"] / walls["tnmt"]
        report["lines_differing_from_base"] = sum(a != b for a, b in zip(outputs["tnmt"], outputs["base"], strict=True))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for name, system in report["systems"].items():
        print(
            f"{name}: {system['median_wall_s']:.2f} s wall, {system['median_start_up_s']:.2f} s start-up,"
            f" {system['sentences_per_s_after_start_up']:.0f} sentences/s after it"
        )
    if args.baseline:
        print(f"speed-up {report['speedup']:.3f}x; {report['lines_differing_from_base']} of {sentences} lines differ")


if __name__ == "__main__":
    main()
