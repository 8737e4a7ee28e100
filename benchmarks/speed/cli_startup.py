"""How long `tnmt --help` takes, and what `import tnmt.cli` imports: the command line must answer at once.

    python -m benchmarks.speed.cli_startup [--runs 20]

Reports the median wall time of `python -m tnmt --help` (a fresh interpreter each run, so Python's own
start-up is included) and, from `python -X importtime`, the time spent importing tnmt and everything it
pulled in (the cumulative times of the top-level `tnmt...` imports).
Writes benchmarks/results/cli_startup.json.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common.host import describe

RESULTS = Path(__file__).resolve().parents[1] / "results" / "cli_startup.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    command = [sys.executable, "-m", "tnmt", "--help"]
    seconds = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        seconds.append(time.perf_counter() - start)
    trace = subprocess.run([sys.executable, "-X", "importtime", *command[1:]], capture_output=True, text=True).stderr
    top_level = re.finditer(r"^import time:\s*\d+ \|\s*(\d+) \| tnmt\S*$", trace, flags=re.M)  # not indented
    tnmt_us = sum(int(m[1]) for m in top_level)
    result = {
        "command": "python -m tnmt --help",
        "runs": args.runs,
        "median_wall_s": round(statistics.median(seconds), 4),
        "min_wall_s": round(min(seconds), 4),
        "tnmt_import_ms": round(tnmt_us / 1000, 1),
        "imports_torch": " torch" in trace,
        "machine": describe(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
