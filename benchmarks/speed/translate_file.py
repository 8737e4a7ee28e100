"""`tnmt translate` on large files: sentences/s and peak RSS, to show memory stays flat as the input grows.

    python -m benchmarks.speed.translate_file --checkpoint outputs/m30k_serve/best [--lines 10000,100000]
        [--beam-size 1]

For each size in `--lines`, a synthetic English file is written (Multi30k's training sentences, each
line two random ones joined, so lines differ from one another and from the training data; `TNMT_DATA_DIR`
or ../shared/data/multi30k beside the repository), then `python -m tnmt translate --checkpoint CKPT -i IN
-o OUT` runs as a child process, timed from launch to exit (start-up and loading included), its peak RSS
read from the kernel's accounting of that child (`os.wait4`). The output must have one line per input
line. Memory is flat when the peak RSS of the largest file is that of the smallest (within noise):
translation goes chunk by chunk (`tnmt.translate.stream`), so only one chunk is ever in memory.
Results go to benchmarks/results/translate_file.json and a markdown table on stdout.
"""

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common.host import describe


def data_dir() -> Path:
    default = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"
    return Path(os.environ.get("TNMT_DATA_DIR", default))


def write_input(path: Path, n_lines: int, seed: int) -> None:
    """`n_lines` lines, each two random Multi30k training sentences joined."""
    with gzip.open(data_dir() / "train.en.gz", "rt", encoding="utf-8") as f:
        sentences = f.read().split("\n")[:-1]
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for _ in range(n_lines):
            f.write(f"{rng.choice(sentences)} {rng.choice(sentences)}\n")


def run(checkpoint: str, n_lines: int, work: Path, extra: list[str]) -> dict:
    source, output = work / f"in_{n_lines}.en", work / f"out_{n_lines}.de"
    write_input(source, n_lines, seed=n_lines)
    command = [sys.executable, "-m", "tnmt", "translate", "--checkpoint", checkpoint, "-i", str(source)]
    measured = timed([*command, "-o", str(output), *extra])
    with output.open("rb") as f:
        out_lines = sum(1 for _ in f)
    assert out_lines == n_lines, f"{out_lines} output lines for {n_lines} input lines"
    return {"lines": n_lines, **measured, "sentences_per_s": round(n_lines / measured["wall_s"], 1)}


def timed(command: list[str], env: dict[str, str] | None = None) -> dict:
    """Run a child process to its end: wall seconds from launch to exit, its peak RSS (MB) and CPU seconds."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    stderr = child.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {stderr.strip()}")
    return {
        "wall_s": round(wall, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # Linux reports KiB
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--lines", default="10000,100000", help="comma-separated input sizes")
    parser.add_argument("--beam-size", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of tnmt translate (OMP_NUM_THREADS)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "translate_file.json"))
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    sizes = [int(n) for n in args.lines.split(",")]
    with tempfile.TemporaryDirectory() as work:
        results = [run(args.checkpoint, n, Path(work), ["--beam-size", str(args.beam_size)]) for n in sizes]
    report = {
        "command": " ".join(["python -m benchmarks.speed.translate_file", *sys.argv[1:]]),
        "machine": describe(),
        "beam_size": args.beam_size,
        "threads": args.threads,
        "runs": results,
        "rss_growth_pct": round(100 * (results[-1]["peak_rss_mb"] / results[0]["peak_rss_mb"] - 1), 1),
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print("| lines | wall s | sentences/s | peak RSS MB |\n| --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['lines']} | {r['wall_s']} | {r['sentences_per_s']} | {r['peak_rss_mb']} |")
    print(f"peak RSS growth from {sizes[0]} to {sizes[-1]} lines: {report['rss_growth_pct']}%")


if __name__ == "__main__":
    main()
