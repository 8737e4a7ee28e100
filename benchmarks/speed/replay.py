"""How fast a replay answers: `tnmt replay` of one sentence through a run's kept models (start-up included), and
the page's first picture after opening "Watch it learn" (issue 67).

    python -m benchmarks.speed.replay --run outputs/replay_run [--runs 5] [--sentence "..."] [--reference "..."]

The CLI is timed as a user runs it, a new process each time (`python -m tnmt replay --run RUN SENTENCE`), the
median of `--runs`; in process, `views.replay.replay` alone (checkpoints loaded one at a time, four passes each).
Then `tnmt serve` is started on the run's `best` checkpoint, and Chromium (Playwright, the system's executable)
opens the page, types the sentence, opens the view, and the seconds until the first attention picture is drawn
are taken, in a fresh browser each run. The server keeps its last replays, so the first run is cold (the server
replays the run) and the later ones warm (its answer kept): both are reported. Writes benchmarks/results/replay.json.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.quality.paragraphs import Server

SENTENCE = "Two dogs are playing in the snow."
REFERENCE = "Zwei Hunde spielen im Schnee."
CHROMIUM = "/usr/bin/chromium"


def first_picture(url: str, sentence: str, reference: str, screenshot: str | None = None, model: int = 0) -> float:
    """Seconds from opening "Watch it learn" (the sentence typed) to its first attention picture, in a fresh browser
    page; with `screenshot`, then a picture of the view with `reference` at kept model `model`, for the README."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(url)
        expect(page.locator("#pair")).to_be_enabled()
        page.locator("#source").fill(sentence)
        expect(page.locator("#replay-section")).to_be_visible()
        start = time.perf_counter()
        page.locator("#replay-section > summary").click()
        expect(page.locator("#replay-attention canvas")).to_have_count(1, timeout=120_000)
        seconds = time.perf_counter() - start
        if screenshot:  # with the reference's probability too: a second replay
            page.locator("#replay-reference").fill(reference)
            expect(page.locator("#replay-metrics")).to_contain_text("reference:", timeout=120_000)
            slider = page.locator("#replay-slider")
            slider.focus()
            for _ in range(model):
                page.keyboard.press("ArrowRight")
            page.locator("#replay-section").screenshot(path=screenshot)
        browser.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sentence", default=SENTENCE)
    parser.add_argument("--reference", default=REFERENCE)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "replay.json"))
    parser.add_argument("--screenshot", help="also save the view at one kept model here (the README's picture)")
    parser.add_argument("--screenshot-model", type=int, default=3, help="which kept model, 0 = the first (3)")
    args = parser.parse_args()

    import torch

    from benchmarks.common.host import describe
    from tnmt.train.run_dir import RunDir
    from tnmt.views.replay import replay

    torch.set_num_threads(2)
    run = Path(args.run)
    kept = RunDir(run).kept_models()
    command = [sys.executable, "-m", "tnmt", "replay", "--run", str(run), args.sentence, "--reference", args.reference]
    cli = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        cli.append(round(time.perf_counter() - start, 3))
    in_process = []
    for _ in range(args.runs):
        start = time.perf_counter()
        replay(run, args.sentence, reference=args.reference)
        in_process.append(round(time.perf_counter() - start, 3))
    server = Server(None, str(run / "best"), run / "replay_bench_serve.log")
    try:
        shots = [args.screenshot] + [None] * (args.runs - 1)
        page = [
            round(first_picture(server.url, args.sentence, args.reference, shot, args.screenshot_model), 3)
            for shot in shots
        ]
    finally:
        server.close()
    result = {
        "command": " ".join(["python -m benchmarks.speed.replay", *sys.argv[1:]]),
        "host": describe(),
        "run": str(run),
        "kept_models": len(kept),
        "steps": [k.step for k in kept],
        "sentence": args.sentence,
        "cli_s": {"median": statistics.median(cli), "runs": cli},
        "in_process_s": {"median": statistics.median(in_process), "runs": in_process},
        "page_first_picture_s": {"cold": page[0], "warm_median": statistics.median(page[1:] or page), "runs": page},
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
