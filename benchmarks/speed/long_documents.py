"""Documents past the queue's size: a 3,000-sentence Word file and a 2,000-cue subtitle file through the CLI and
both APIs, with the time, the peak memory, and a single-sentence client's latency meanwhile (issue 80).

    python -m benchmarks.speed.long_documents --checkpoint /work/outputs/m30k_15/best [--sentences 3000]
        [--cues 2000] [--threads 2] [--every 0.25]

The documents are made of Multi30k's English test and validation captions (`TNMT_DATA_DIR` or ../shared/data/multi30k):
a .docx of paragraphs of three sentences each (python-docx), a .srt of one caption a cue (srt). Each goes through
- `tnmt translate --file IN --out OUT` as a child process: wall seconds from launch to exit (loading included) and
  its peak RSS from the kernel's accounting (`os.wait4`);
- `POST /v1/translate_file` and LibreTranslate's `POST /translate_file` then `GET` of its `translatedFileUrl`, on
  one `tnmt serve` started for the run (its defaults: `max_queue` 1,024, so each document is several times the
  queue), while a client sends one sentence to `/v1/translate` every `--every` s (p50, p99, worst of its answers);
  the server's peak RSS (VmHWM) after each.
Every answer is read back with its format's library and must hold as many paragraphs (cues) as its input, each
paragraph changed (`translated_share`). Writes benchmarks/results/long_documents.json.
"""

import argparse
import io
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks.common.host import describe
from benchmarks.speed.serve import rss_mb, start_server, stop_server
from benchmarks.speed.stall import light_client, multipart, send
from benchmarks.speed.translate_file import timed


def sentences(n: int) -> list[str]:
    """`n` distinct English captions: the test set's, then the validation set's, then both again."""
    from benchmarks.quality.markup import data_dir, read

    found = read(data_dir() / "test_2016_flickr.en.gz") + read(data_dir() / "val.en.gz")
    return [found[k % len(found)] for k in range(n)]


def word_document(texts: list[str]) -> bytes:
    import docx

    document = docx.Document()
    for at in range(0, len(texts), 3):
        document.add_paragraph(" ".join(texts[at : at + 3]))
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def subtitles(texts: list[str]) -> bytes:
    from datetime import timedelta

    import srt

    cues = [
        srt.Subtitle(k + 1, timedelta(seconds=3 * k), timedelta(seconds=3 * k + 2.5), text)
        for k, text in enumerate(texts)
    ]
    return srt.compose(cues).encode()


def pieces(name: str, data: bytes) -> list[str]:
    """The paragraphs (cues) of a .docx (.srt), as its library reads them."""
    if name.endswith(".docx"):
        import docx

        return [p.text for p in docx.Document(io.BytesIO(data)).paragraphs]
    import srt

    return [cue.content for cue in srt.parse(data.decode())]


def judged(name: str, source: bytes, out: bytes) -> dict:
    before, after = pieces(name, source), pieces(name, out)
    if len(after) != len(before):
        raise SystemExit(f"{name}: {len(after)} pieces came back for {len(before)}")
    changed = sum(a.strip() != b.strip() and bool(a.strip()) for a, b in zip(after, before, strict=True))
    return {"pieces": len(before), "translated_share": round(changed / max(1, len(before)), 4)}


def through_cli(checkpoint: str, name: str, data: bytes, work: Path, threads: int) -> dict:
    source, out = work / name, work / f"out.{name}"
    source.write_bytes(data)
    command = [sys.executable, "-m", "tnmt", "translate", "--checkpoint", checkpoint, "--threads", str(threads)]
    seen = timed([*command, "--file", str(source), "--out", str(out)])
    return {**seen, **judged(name, data, out.read_bytes())}


def download(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def through_server(server, port: int, name: str, data: bytes, api: str, args: argparse.Namespace) -> dict:
    """One document through `api` ("v1" or "libretranslate") beside the light client."""
    with light_client(port, every=args.every, timeout=args.timeout) as seen:
        start = time.monotonic()
        if api == "v1":
            status, body = send(port, "/v1/translate_file", *multipart(name, data), timeout=args.timeout)
        else:
            form = multipart(name, data, source="en", target="de")
            status, body = send(port, "/translate_file", *form, timeout=args.timeout)
            if status == 200:
                body = download(json.loads(body)["translatedFileUrl"], args.timeout)
        seconds = time.monotonic() - start
    if status != 200:
        raise SystemExit(f"{api} {name}: {status} {body[:300]!r}")
    peak = round(rss_mb(server.pid, "VmHWM"), 1)
    return {**judged(name, data, body), "seconds": round(seconds, 2), "server_peak_rss_mb": peak, **seen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--sentences", type=int, default=3000, help="of the Word document")
    parser.add_argument("--cues", type=int, default=2000, help="of the subtitle file")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--every", type=float, default=0.25, help="seconds between the light client's sentences")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "long_documents.json"))
    args = parser.parse_args()

    documents = {"long.docx": word_document(sentences(args.sentences)), "long.srt": subtitles(sentences(args.cues))}
    command = " ".join(["python -m benchmarks.speed.long_documents", *sys.argv[1:]])
    result = {"command": command, "host": describe(), "checkpoint": args.checkpoint, "documents": {}}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, data in documents.items():
            cli = through_cli(args.checkpoint, name, data, work, args.threads)
            result["documents"][name] = {"bytes": len(data), "cli": cli}
            print(name, "cli", result["documents"][name]["cli"], flush=True)
        log = work / "serve.log"
        server, port = start_server(Path(args.checkpoint), [], threads=args.threads, log=log, timeout=300)
        try:
            result["server_idle_rss_mb"] = round(rss_mb(server.pid), 1)
            for name, data in documents.items():
                for api in ("v1", "libretranslate"):
                    seen = through_server(server, port, name, data, api, args)
                    result["documents"][name][api] = seen
                    print(name, api, seen, flush=True)
        finally:
            stop_server(server)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "host"}, indent=1))


if __name__ == "__main__":
    main()
