"""Documents per minute: a 300-segment Word document through the CLI and the server, against the same segments as
plain text (issue 66).

    python -m benchmarks.speed.documents --checkpoint /work/outputs/base45/best [--runs 5] [--segments 300]

The first `--segments` English captions of test_2016_flickr (`TNMT_DATA_DIR` or ../shared/data/multi30k beside the
repository) become a Word document, one caption a paragraph, a dictionary word of each bold where the caption has
one (benchmarks/quality/documents.py builds it), and a text file of the same captions, one a line. Timed, the median
of `--runs` runs each, the ways alternating within a run so that the host's drift falls on all alike:

  - in process (the model loaded once): `translate_file` of the .docx, of the .txt, and `Translator.translations`
    of the captions (the format's own overhead is the difference; reading and writing the .docx are also timed
    alone);
  - the CLI, a new process each time (start-up and model load included): `tnmt translate --file doc.docx`,
    `--file doc.txt`, and `tnmt translate -i lines.txt` (the captions as lines);
  - the server (`tnmt serve`, started once): `POST /v1/translate_file` of the .docx and of the .txt, and
    `POST /v1/translate` of the captions as one list.

Documents per minute is 60 / the median seconds. Writes benchmarks/results/documents_speed.json.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from benchmarks.quality.documents import build_docx, parts
from benchmarks.quality.markup import DICTIONARY, _bare, data_dir, read
from benchmarks.quality.paragraphs import Server


def bold_parts(sources: list[str]) -> list[tuple[str, str, str]]:
    """Each caption cut around its first dictionary word (or around its first word where it has none)."""
    hits = []
    for k, source in enumerate(sources):
        words = source.split()
        i = next((i for i, w in enumerate(words) if _bare(w) in DICTIONARY), 0)
        hits.append((k, i, ""))
    return parts(sources, hits)


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(ways: dict[str, Callable[[], object]], runs: int) -> dict:
    """Each way's seconds over `runs` runs (alternating within a run), their median and documents per minute."""
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(runs):
        for name, call in ways.items():
            seconds[name].append(round(timed(call), 3))
    medians = {name: statistics.median(s) for name, s in seconds.items()}
    return {
        name: {"median_s": medians[name], "documents_per_minute": round(60 / medians[name], 2), "runs_s": s}
        for name, s in seconds.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--segments", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "documents_speed.json"))
    args = parser.parse_args()

    import torch

    from benchmarks.common.host import describe
    from tnmt.documents.formats import read_file, translate_file
    from tnmt.translate.translator import Translator

    torch.set_num_threads(2)
    sources = read(data_dir() / "test_2016_flickr.en.gz")[: args.segments]
    work = Path(tempfile.mkdtemp(prefix="tnmt-documents-"))
    docx = build_docx(bold_parts(sources))
    text = "".join(s + "\n" for s in sources).encode()
    (work / "doc.docx").write_bytes(docx)
    (work / "doc.txt").write_bytes(text)
    translator = Translator.from_checkpoint(args.checkpoint)
    pending = read_file(docx, "doc.docx")
    assert len(pending.units) == args.segments, len(pending.units)
    found = pending.translations(translator)
    result = {
        "command": " ".join(["python -m benchmarks.speed.documents", *sys.argv[1:]]),
        "host": describe(),
        "checkpoint": args.checkpoint,
        "segments": args.segments,
        "docx_bytes": len(docx),
        "in_process": measure(
            {
                "docx": lambda: translate_file(translator, docx, "doc.docx"),
                "txt": lambda: translate_file(translator, text, "doc.txt"),
                "plain_translations": lambda: translator.translations(sources),
                "docx_read_only": lambda: read_file(docx, "doc.docx"),
                "docx_write_only": lambda: read_file(docx, "doc.docx").write(found),
            },
            args.runs,
        ),
    }
    print(json.dumps(result["in_process"], indent=1), flush=True)
    cli = [sys.executable, "-m", "tnmt", "translate", "--checkpoint", args.checkpoint]
    result["cli"] = measure(
        {
            "docx": lambda: subprocess.run([*cli, "--file", work / "doc.docx", "--out", work / "o.docx"], check=True),
            "txt": lambda: subprocess.run([*cli, "--file", work / "doc.txt", "--out", work / "o.txt"], check=True),
            "lines": lambda: subprocess.run([*cli, "-i", work / "doc.txt", "-o", work / "o.lines"], check=True),
        },
        args.runs,
    )
    print(json.dumps(result["cli"], indent=1), flush=True)
    server = Server(None, args.checkpoint, work / "serve.log")
    try:
        url, pair = server.url, {"source": "en", "target": "de"}

        def post_file(name: str, data: bytes) -> None:
            response = httpx.post(f"{url}/v1/translate_file", files={"file": (name, data)}, data=pair, timeout=600)
            response.raise_for_status()

        def post_texts() -> None:
            httpx.post(f"{url}/v1/translate", json={"text": sources, **pair}, timeout=600).raise_for_status()

        post_file("doc.docx", docx)  # warm
        ways = {"docx": lambda: post_file("doc.docx", docx), "txt": lambda: post_file("doc.txt", text)}
        result["server"] = measure({**ways, "texts": post_texts}, args.runs)
    finally:
        server.close()
    print(json.dumps(result["server"], indent=1), flush=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
