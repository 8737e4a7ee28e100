"""Real text through LibreTranslate's `/translate`: paragraphs, line lists and a long text against the same
sentences one by one (issue 65).

    python -m benchmarks.quality.paragraphs --checkpoint /work/outputs/base45/best [--baseline-src PATH]

A `tnmt serve` of the checkpoint is started on loopback, and the English captions of test_2016_flickr
(`TNMT_DATA_DIR` or ../shared/data/multi30k beside the repository; a final "." added where a caption has no
final punctuation, so that a paragraph of them reads as prose) are sent as:

  (a) one by one: every caption its own text (what a client that segments itself sends);
  (b) paragraphs: 60 paragraphs of 3-6 captions joined by a space (seeded); chrF (sacreBLEU) against the
      German references joined the same way, beside the chrF of (a)'s translations joined the same way (the
      target: within 0.5); the share of paragraphs whose translation has as many sentences as the paragraph
      (sentencex on the German; the target: >= 98%); the length ratio to (a);
  (c) lists: 30 texts of 5-12 captions, one per line, some lines blank, some with "- " or "1. " markers; the
      share that come back with the same line layout (the same lines, blank where the source's were, each
      marker kept; the target: 100%);
  (d) a long text: the first 25 captions as one paragraph; its length against (a)'s (within 5%);
  (e) speed: the 25-caption text as one request against its 25 sentences as 25 concurrent requests, and
      single-caption requests one after another; the median of `--runs` runs, side by side in one run. With
      `--baseline-src` (the `src` of a checkout of main before this issue, run by this Python), its server
      answers the same single-caption requests in the same run, alternating with this one's.

Writes benchmarks/results/paragraphs.json (with the host) and prints a summary.
"""

import argparse
import asyncio
import gzip
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import sacrebleu
import sentencex

FINAL = re.compile(r"[.!?…]['\"”)]*$")


def data_dir() -> Path:
    """The Multi30k copy: `TNMT_DATA_DIR`, else ../shared/data/multi30k beside the repository."""
    default = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"
    return Path(os.environ.get("TNMT_DATA_DIR", default))


def captions(language: str) -> list[str]:
    """test_2016_flickr in `language`, each with final punctuation."""
    path = data_dir() / f"test_2016_flickr.{language}.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    return [line.strip() if FINAL.search(line.strip()) else line.strip() + "." for line in lines]


def layout(text: str) -> list[str]:
    """A text's line layout: per line, "" when blank, else its list marker (or "text")."""
    shape = []
    for line in text.split("\n"):
        marker = re.match(r"\s*(- |\d+\. )", line)
        shape.append("" if not line.strip() else marker.group(1) if marker else "text")
    return shape


def sentences_of(text: str) -> int:
    """Sentences in a German text, as sentencex counts them."""
    return sum(1 for s in sentencex.segment("de", text) if s.strip())


class Server:
    """A `tnmt serve` of a checkpoint on a free loopback port, of the tnmt in `src` (None: this one)."""

    def __init__(self, src: str | None, checkpoint: str, log: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        command = [sys.executable, "-m", "tnmt", "serve", "--checkpoint", checkpoint, "--port", str(self.port)]
        command += ["--max-chars", "20000", "--max-texts", "1000", "--max-body-bytes", "10000000", "--threads", "2"]
        env = os.environ | ({"PYTHONPATH": src} if src else {})
        self.process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 300
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited:\n{log.read_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("no /health in 300 s")
            time.sleep(0.3)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def translate(url: str, q: str | list[str], **fields) -> dict:
    """One POST /translate (LibreTranslate's), en -> de."""
    response = httpx.post(f"{url}/translate", json={"q": q, "source": "en", "target": "de", **fields}, timeout=600)
    response.raise_for_status()
    return response.json()


async def concurrent(url: str, texts: list[str]) -> float:
    """Seconds for `texts` sent as that many concurrent requests."""
    async with httpx.AsyncClient(timeout=600) as client:
        start = time.perf_counter()
        body = {"source": "en", "target": "de"}
        await asyncio.gather(*(client.post(f"{url}/translate", json={"q": t, **body}) for t in texts))
        return time.perf_counter() - start


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def quality(url: str, sources: list[str], references: list[str], rng: random.Random) -> dict:
    """(a)-(d) of the module docstring."""
    one_by_one = translate(url, sources)["translatedText"]
    groups, at = [], 0
    while len(groups) < 60:
        n = rng.randint(3, 6)
        groups.append(list(range(at, at + n)))
        at += n
    paragraphs = [" ".join(sources[i] for i in g) for g in groups]
    translated = translate(url, paragraphs)["translatedText"]
    joined = [" ".join(one_by_one[i] for i in g) for g in groups]
    refs = [" ".join(references[i] for i in g) for g in groups]
    same_count = [sentences_of(t) == len(g) for t, g in zip(translated, groups, strict=True)]
    lists, layouts_kept = [], []
    for _ in range(30):
        n = rng.randint(5, 12)
        lines = []
        for k in range(n):
            line = sources[at]
            at += 1
            marker = rng.choice(["", "", "- ", f"{k + 1}. "])
            lines.append(marker + line)
            if rng.random() < 0.25:
                lines.append("")
        lists.append("\n".join(lines))
    for text, out in zip(lists, translate(url, lists)["translatedText"], strict=True):
        layouts_kept.append(layout(text) == layout(out))
    long_text = " ".join(sources[:25])
    [long_out] = translate(url, [long_text])["translatedText"]
    long_alone = " ".join(one_by_one[:25])
    return {
        "paragraphs": len(groups),
        "chrf_paragraphs": sacrebleu.corpus_chrf(translated, [refs]).score,
        "chrf_one_by_one_joined": sacrebleu.corpus_chrf(joined, [refs]).score,
        "same_sentence_count_share": sum(same_count) / len(same_count),
        "length_ratio_to_one_by_one": sum(map(len, translated)) / sum(map(len, joined)),
        "lists": len(lists),
        "same_layout_share": sum(layouts_kept) / len(layouts_kept),
        "long_text_characters": len(long_text),
        "long_text_length_ratio": len(long_out) / len(long_alone),
        "example_paragraph": {"source": paragraphs[0], "translation": translated[0], "one_by_one": joined[0]},
        "example_list": {"source": lists[0], "translation": translate(url, lists[0])["translatedText"]},
    }


def speed(url: str, sources: list[str], runs: int, baseline: str | None) -> dict:
    """(e) of the module docstring."""
    long_text = " ".join(sources[:25])
    singles = sources[100:130]
    whole, split, mine, theirs = [], [], [], []
    for _ in range(runs):
        whole.append(timed(lambda: translate(url, long_text)))
        split.append(asyncio.run(concurrent(url, sources[:25])))
        mine.append(statistics.median(timed(lambda t=t: translate(url, t)) for t in singles))
        if baseline:
            theirs.append(statistics.median(timed(lambda t=t: translate(baseline, t)) for t in singles))
    result = {
        "runs": runs,
        "long_text_one_request_s": statistics.median(whole),
        "long_text_25_requests_s": statistics.median(split),
        "single_sentence_request_s": statistics.median(mine),
    }
    result["runs_s"] = {"long_text_one_request": whole, "long_text_25_requests": split, "single": mine}
    if baseline:
        result["single_sentence_request_baseline_s"] = statistics.median(theirs)
        result["runs_s"]["single_baseline"] = theirs
        result["single_sentence_paired_ratio_median"] = statistics.median(
            a / b for a, b in zip(mine, theirs, strict=True)
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--baseline-src", help="the src directory of a checkout of main before issue 65")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/paragraphs.json")
    args = parser.parse_args()
    from benchmarks.common.host import describe

    sources, references = captions("en"), captions("de")
    logs = Path(tempfile.mkdtemp(prefix="paragraphs-"))
    server = Server(None, args.checkpoint, logs / "serve.log")
    baseline = Server(args.baseline_src, args.checkpoint, logs / "baseline.log") if args.baseline_src else None
    try:
        result = {"host": describe(), "checkpoint": args.checkpoint, "seed": args.seed}
        result["quality"] = quality(server.url, sources, references, random.Random(args.seed))
        result["speed"] = speed(server.url, sources, args.runs, baseline.url if baseline else None)
    finally:
        server.close()
        if baseline:
            baseline.close()
    Path(args.out).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    summary = {k: v for k, v in result["quality"].items() if not k.startswith("example")} | result["speed"]
    summary.pop("runs_s")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
