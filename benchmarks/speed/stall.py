"""Does one heavy request stall everyone else? A light client beside in-limits heavy requests, on loopback.

    python -m benchmarks.speed.stall --checkpoint CKPT [--baseline ../wt-base] [--out benchmarks/results/stall.json]

The script starts `python -m tnmt serve --checkpoint CKPT` (this checkout's; then, with `--baseline DIR`, the
tnmt of DIR/src, e.g. a git worktree of main before the text layer was redone) and, for each heavy request in
turn, runs a light client that sends `POST /v1/translate {"text": "A dog runs."}` every `--every` seconds from
one second before the heavy request until its answer came (or `--heavy-timeout` passed). Heavy requests, each
inside the server's default limits:

- `libre-64x10k`: LibreTranslate's `/translate` of 64 texts of 10,000 letters (one long word each);
- `file-40k-word`: `/v1/translate_file` of a .txt holding one 40,000-letter word;
- `file-2mb-sentences`: `/v1/translate_file` of a 2 MB .txt of Multi30k's sentences, one a line (more
  sentences than the queue holds: refused, after it is read and split).

Per heavy request: its status and seconds, and the light client's answers (count, errors), median and worst
latency. Then a load of single sentences (`--concurrency` clients, each sending its next when its answer came,
Multi30k's test sentences in turn) for `--load-seconds`, once alone and once while a Word document of 300
paragraphs is uploaded to `/v1/translate_file` every `--upload-every` seconds: p50 and p99 of each, and their
ratio. Last, SIGTERM during one more heavy request: how long the server takes to exit, and its exit code.
With `--scale`, instead: three uploads at 1x, 10x and 100x their size (`scaled_requests`: a .txt of one long word,
a .txt of sentences, an .html of bold words), the light client beside each: work linear in the text keeps the
light client's worst latency flat as the upload grows.
Targets (issue 79): the light client's worst latency under 1 s beside each heavy request; the load's p99 with
uploads at most 1.5x the p99 without; the server stops within a few seconds of finishing what it accepted.
"""

import argparse
import contextlib
import json
import signal
import statistics
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

from benchmarks.common.host import describe
from benchmarks.speed.serve import read_sentences, start_server

LIGHT = json.dumps({"text": "A dog runs."}).encode()


def send(port: int, path: str, body: bytes, content_type: str, timeout: float) -> tuple[int, bytes]:
    """(status, body) of one POST; a status of 0 is a connection error or a timeout."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=body, headers={"Content-Type": content_type}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, TimeoutError, ConnectionError):
        return 0, b""


def post(port: int, path: str, body: bytes, content_type: str, timeout: float) -> tuple[int, float]:
    """(status, seconds) of one POST (`send`)."""
    start = time.monotonic()
    status, _ = send(port, path, body, content_type, timeout)
    return status, time.monotonic() - start


def multipart(name: str, data: bytes, **fields: str) -> tuple[bytes, str]:
    """A form of file `name` (`data`) and `fields`: (body, content type)."""
    boundary = uuid.uuid4().hex
    field = '--{}\r\nContent-Disposition: form-data; name="{}"\r\n\r\n{}\r\n'
    head = "".join(field.format(boundary, k, v) for k, v in fields.items())
    head = (
        f'{head}--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    return head + data + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def heavy_requests() -> dict[str, tuple[str, bytes, str]]:
    """Each heavy request: (path, body, content type)."""
    sentences = read_sentences("en")
    lines, size = [], 0
    while size < 2 * 2**20:
        line = sentences[len(lines) % len(sentences)]
        lines.append(line)
        size += len(line) + 1
    libre = json.dumps({"q": ["a" * 10_000] * 64, "source": "en", "target": "de"}).encode()
    return {
        "libre-64x10k": ("/translate", libre, "application/json"),
        "file-40k-word": ("/v1/translate_file", *multipart("word.txt", b"a" * 40_000)),
        "file-2mb-sentences": ("/v1/translate_file", *multipart("big.txt", "\n".join(lines).encode())),
    }


def scaled_requests() -> dict[str, tuple[str, bytes, str]]:
    """Uploads at 1x, 10x and 100x (`--scale`): (path, body, content type) by name."""
    sentences = read_sentences("en")
    words = " ".join(sentences).split()
    requests = {}
    for scale in (1, 10, 100):
        text, size = [], 0
        while size < 40_000 * scale:
            text.append(sentences[len(text) % len(sentences)])
            size += len(text[-1]) + 1
        bold = " ".join(f"<b>{words[n % len(words)]}</b>" for n in range(4_000 * scale))
        requests[f"txt one long word {40_000 * scale}"] = (
            "/v1/translate_file",
            *multipart("w.txt", b"a" * 40_000 * scale),
        )
        requests[f"txt sentences {40_000 * scale}"] = (
            "/v1/translate_file",
            *multipart("s.txt", "\n".join(text).encode()),
        )
        page = f"<html><body><p>{bold}</p></body></html>".encode()
        requests[f"html bold words {4_000 * scale}"] = ("/v1/translate_file", *multipart("b.html", page))
    return requests


@contextlib.contextmanager
def light_client(port: int, *, every: float, timeout: float) -> Iterator[dict]:
    """A single-sentence client sending every `every` s from a second before the block until it ends; the dict
    it yields gets its latencies' summary (`light_answers`, `light_errors`, p50, p99, worst) when it ends."""
    latencies, errors, done, seen = [], [], threading.Event(), {}

    def light() -> None:
        while not done.is_set():
            status, seconds = post(port, "/v1/translate", LIGHT, "application/json", timeout=timeout)
            (latencies if status == 200 else errors).append(seconds if status == 200 else status)
            time.sleep(max(0.0, every - seconds))

    client = threading.Thread(target=light)
    client.start()
    time.sleep(1.0)
    try:
        yield seen
    finally:
        done.set()
        client.join()
        ordered = sorted(latencies)
        seen |= {
            "light_answers": len(latencies),
            "light_errors": errors,
            "light_p50_s": round(statistics.median(ordered), 3) if ordered else None,
            "light_p99_s": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3) if ordered else None,
            "light_worst_s": round(ordered[-1], 3) if ordered else None,
        }


def beside(port: int, heavy: tuple[str, bytes, str], *, every: float, timeout: float) -> dict:
    """The heavy request, with the light client sending beside it from a second before until it is answered."""
    with light_client(port, every=every, timeout=timeout) as seen:
        status, seconds = post(port, *heavy, timeout=timeout)
    return {"heavy_status": status, "heavy_s": round(seconds, 2), **seen}


def word_document(paragraphs: int) -> bytes:
    import io

    import docx

    document, sentences = docx.Document(), read_sentences("en")
    for n in range(paragraphs):
        document.add_paragraph(" ".join(sentences[(3 * n + k) % len(sentences)] for k in range(3)))
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def under_load(port: int, args: argparse.Namespace, *, uploads: bool) -> dict:
    """p50 / p99 of single sentences at `args.concurrency` for `args.load_seconds`, with or without documents
    uploaded beside them."""
    sentences, latencies, errors = read_sentences("en"), [], []
    stop = time.monotonic() + args.load_seconds
    document = multipart("report.docx", word_document(300)) if uploads else None
    uploaded: list[tuple[int, float]] = []

    def client(k: int) -> None:
        n = k
        while time.monotonic() < stop:
            body = json.dumps({"text": sentences[n % len(sentences)]}).encode()
            status, seconds = post(port, "/v1/translate", body, "application/json", timeout=args.heavy_timeout)
            (latencies if status == 200 else errors).append(seconds if status == 200 else status)
            n += args.concurrency

    def uploader() -> None:
        while time.monotonic() < stop:
            started = time.monotonic()
            uploaded.append(post(port, "/v1/translate_file", *document, timeout=args.heavy_timeout))
            time.sleep(max(0.0, args.upload_every - (time.monotonic() - started)))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.concurrency)]
    threads += [threading.Thread(target=uploader)] if uploads else []
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    return {
        "answers": len(latencies),
        "errors": errors,
        "p50_s": round(statistics.median(latencies), 3),
        "p99_s": round(latencies[int(0.99 * (len(latencies) - 1))], 3),
        "uploads": [{"status": status, "s": round(seconds, 2)} for status, seconds in uploaded],
    }


def stop_during(server, port: int, heavy: tuple[str, bytes, str], timeout: float) -> dict:
    """SIGTERM half a second into a heavy request: seconds until the server exits, and its exit code."""
    answer: dict = {}
    sender = threading.Thread(target=lambda: answer.update(status=post(port, *heavy, timeout=timeout)[0]))
    sender.start()
    time.sleep(0.5)
    start = time.monotonic()
    server.send_signal(signal.SIGTERM)
    try:
        code = server.wait(timeout=timeout)
    except Exception:  # noqa: BLE001 (any failure to stop is the finding)
        server.kill()
        code = None
    sender.join()
    return {"exit_s": round(time.monotonic() - start, 2), "exit_code": code, "heavy_status": answer.get("status")}


def run(checkpoint: Path, checkout: Path | None, args: argparse.Namespace, log: Path) -> dict:
    flags = args.serve_flags.split()
    server, port = start_server(checkpoint, flags, threads=args.threads, log=log, timeout=180, checkout=checkout)
    results = {}
    try:
        chosen = {} if args.load_only else scaled_requests() if args.scale else heavy_requests()
        for name, heavy in chosen.items():
            results[name] = beside(port, heavy, every=args.every, timeout=args.heavy_timeout)
            print(name, results[name], flush=True)
        if args.scale:
            return results
        time.sleep(args.settle_s)  # a heavy request past its deadline may leave a share decoding: let it end
        alone = under_load(port, args, uploads=False)
        time.sleep(args.settle_s)
        beside_uploads = under_load(port, args, uploads=True)
        results["load"] = {
            "concurrency": args.concurrency,
            "alone": alone,
            "with_uploads": beside_uploads,
            "p99_ratio": round(beside_uploads["p99_s"] / alone["p99_s"], 2),
        }
        print("load", results["load"], flush=True)
        results["sigterm_during_libre-64x10k"] = stop_during(
            server, port, heavy_requests()["libre-64x10k"], args.heavy_timeout
        )
    finally:
        if server.poll() is None:
            server.kill()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--baseline", type=Path, help="another checkout (its src/ is imported) run after this one")
    parser.add_argument("--every", type=float, default=0.2, help="seconds between the light client's requests")
    parser.add_argument("--heavy-timeout", type=float, default=300.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--load-seconds", type=float, default=30.0)
    parser.add_argument("--upload-every", type=float, default=4.0)
    parser.add_argument("--serve-flags", default="", help="more flags for tnmt serve, e.g. '--max-batch-tokens 1024'")
    parser.add_argument("--settle-s", type=float, default=15.0, help="idle seconds before each load phase")
    parser.add_argument("--load-only", action="store_true", help="the load alone and with uploads, then SIGTERM")
    parser.add_argument("--scale", action="store_true", help="uploads at 1x, 10x and 100x instead (scaled_requests)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/stall.json"))
    args = parser.parse_args()
    out = {"host": describe(), "checkpoint": str(args.checkpoint), "this": {}}
    logs = args.out.with_suffix(".server.log")
    out["this"] = run(args.checkpoint, None, args, logs)
    if args.baseline is not None:
        out["baseline"] = run(args.checkpoint, args.baseline, args, logs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".json.part")
    partial.write_text(json.dumps(out, indent=1) + "\n")
    partial.replace(args.out)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
