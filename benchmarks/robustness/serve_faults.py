"""`tnmt serve` under load with faulty clients (issue 12, section 5): nothing but 503/504 goes wrong,
nothing leaks.

    python -m benchmarks.robustness.serve_faults [--checkpoint CKPT] [--requests 10000] [--concurrency 64]
                                                 [--hang-up 0.1] [--slow 0.002]

The server (`python -m tnmt serve`, one torch thread, `--body-timeout-s 2`) is started and stopped
with the helpers of benchmarks/speed/serve.py. Without `--checkpoint` the script saves a tiny random model
(d_model 32, 1+1 layers; the answers are nonsense, the load is real) with a tokenizer trained on the
sentences. Sentences: Multi30k's test_2016_flickr English side when found (as serve.py), else generated
number words. `--concurrency` connections send `--requests` single-sentence requests in all; each
request is, at random:
- normal (`POST /v1/translate`): must get 200 with one translation, or the documented 503 (queue full)
  or 504 (deadline);
- a hang-up (fraction `--hang-up`): the client closes the connection 0-200 ms after sending, before its
  answer (its sentence should be dropped from the queue: counted by the server as 499);
- slow (fraction `--slow`): headers and half the body, then nothing; must get 408 after the body
  deadline (these hold one of the connections for 2 s).
Anything else (another status, a connection error on a normal request) is an error and must be 0.

Before the load (after a warm-up of 500 requests) and after it (once the queue is empty), the server's
RSS (VmRSS) and asyncio task count (`tnmt_tasks` in /metrics) are read: RSS must stay within 5% and the
task count must come back to where it was. Finally SIGTERM: exit status 0.
Results: benchmarks/results/serve_faults.json and a summary on stdout.
"""

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks.common.host import describe
from benchmarks.speed.serve import get, read_sentences, rss_mb, start_server, stop_server

TARGETS = {"errors": 0, "rss_growth_pct": 5.0, "task_growth": 0}
BODY_TIMEOUT_S = 2.0


def sentences() -> list[str]:
    try:
        return read_sentences()
    except OSError:
        from num2words import num2words

        rng = random.Random(0)
        return [num2words(rng.randrange(1, 100_000)) for _ in range(1000)]


def tiny_checkpoint(texts: list[str], path: Path) -> Path:
    """A random tiny model with a real tokenizer, naming its languages (en -> de)."""
    import torch

    from tnmt.checkpoint import save_checkpoint
    from tnmt.config import DecodeConfig, ModelConfig
    from tnmt.data.tokenizer import Tokenizer
    from tnmt.model import Transformer

    tokenizer = Tokenizer.train(texts, vocab_size=min(1000, 8 * len(texts)))
    torch.manual_seed(0)
    vocab = tokenizer.vocab_size
    sizes = dict(d_model=32, n_heads=2, d_ff=64, max_len=128, n_encoder_layers=1, n_decoder_layers=1)
    config = ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, **sizes)
    decode = DecodeConfig(beam_size=2, max_len_b=10)
    return save_checkpoint(path, Transformer(config), tokenizer, decode=decode, directions=[("en", "de")])


def metric(port: int, name: str, label: str = "") -> float:
    """The sum of a metric's samples from /metrics (those whose labels include `label`, e.g. 'status="499"')."""
    total = 0.0
    for line in get(port, "/metrics").decode().splitlines():
        if line.startswith(name) and line[len(name)] in " {" and label in line:
            total += float(line.rpartition(" ")[2])
    return total


async def slow_request(port: int, body: bytes) -> str:
    """Headers and half the body, then silence: the status line's code (408 expected)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    writer.write(head.encode() + b"\r\n\r\n" + body[: len(body) // 2])
    await writer.drain()
    try:
        status_line = await asyncio.wait_for(reader.readline(), BODY_TIMEOUT_S + 30)
        return status_line.split()[1].decode() if status_line else "closed"
    finally:
        writer.close()


async def run_load(port: int, texts: list[str], args: argparse.Namespace, *, seed: int) -> Counter:
    """Send the requests; outcomes by kind: "200", "503", "hung up", "slow 408", or an error name."""
    rng = random.Random(seed)
    tickets = iter(range(args.requests))
    outcomes: Counter[str] = Counter()
    url = f"http://127.0.0.1:{port}/v1/translate"

    async def worker(client: httpx.AsyncClient) -> None:
        for i in tickets:
            body = {"text": texts[i % len(texts)]}
            draw = rng.random()
            if draw < args.slow:
                outcomes[f"slow {await slow_request(port, json.dumps(body).encode())}"] += 1
                continue
            try:
                if draw < args.slow + args.hang_up:
                    await asyncio.wait_for(client.post(url, json=body), rng.uniform(0, 0.2))
                    outcomes["hang-up answered first"] += 1
                    continue
                response = await client.post(url, json=body)
                malformed = response.status_code == 200 and len(response.json()["translations"]) != 1
                outcomes["200 malformed" if malformed else str(response.status_code)] += 1
            except TimeoutError:
                outcomes["hung up"] += 1
            except (httpx.HTTPError, ValueError, KeyError) as error:
                outcomes[type(error).__name__] += 1

    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=60.0) as client:
        await asyncio.gather(*(worker(client) for _ in range(args.concurrency)))
    return outcomes


def settle(port: int, timeout: float = 60) -> None:
    """Wait until no sentence is queued and the last hang-ups were noticed."""
    deadline = time.monotonic() + timeout
    while metric(port, "tnmt_queue_sentences") and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, help="default: a tiny random model made here")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--hang-up", type=float, default=0.1, help="fraction of clients that hang up")
    parser.add_argument("--slow", type=float, default=0.002, help="fraction of clients that send half a body")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "serve_faults.json"
    )
    args = parser.parse_args()
    texts = sentences()
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint or tiny_checkpoint(texts, Path(tmp) / "tiny")
        flags = [f"--body-timeout-s={BODY_TIMEOUT_S}"]
        server, port = start_server(checkpoint, flags, threads=1, log=Path(tmp) / "server.log", timeout=300)
        try:
            warmup = argparse.Namespace(**{**vars(args), "requests": args.warmup, "hang_up": 0.0, "slow": 0.0})
            asyncio.run(run_load(port, texts, warmup, seed=1))
            settle(port)
            before = {"rss_mb": rss_mb(server.pid), "tasks": metric(port, "tnmt_tasks")}
            gone_before = metric(port, "tnmt_requests_total", 'status="499"')
            started = time.monotonic()
            outcomes = asyncio.run(run_load(port, texts, args, seed=2))
            wall = time.monotonic() - started
            settle(port)
            after = {"rss_mb": rss_mb(server.pid), "tasks": metric(port, "tnmt_tasks")}
            gone = metric(port, "tnmt_requests_total", 'status="499"')
        except BaseException:
            server.kill()
            print((Path(tmp) / "server.log").read_text()[-3000:], file=sys.stderr)
            raise
        exit_code = stop_server(server)
    expected = {"200", "503", "504", "hung up", "hang-up answered first", "slow 408"}
    errors = {kind: n for kind, n in outcomes.items() if kind not in expected}
    summary = {
        "requests": sum(outcomes.values()),
        "outcomes": dict(outcomes),
        "errors": sum(errors.values()),
        "hang_ups_seen_by_server_499": gone - gone_before,
        "wall_s": round(wall, 1),
        "rss_mb_before_after": [round(before["rss_mb"], 1), round(after["rss_mb"], 1)],
        "rss_growth_pct": round(100 * (after["rss_mb"] / before["rss_mb"] - 1), 2),
        "tasks_before_after": [before["tasks"], after["tasks"]],
        "task_growth": after["tasks"] - before["tasks"],
        "exit_code_after_sigterm": exit_code,
    }
    summary["met"] = {
        "errors": summary["errors"] == TARGETS["errors"],
        "rss_growth_pct": abs(summary["rss_growth_pct"]) < TARGETS["rss_growth_pct"],
        "task_growth": summary["task_growth"] <= TARGETS["task_growth"],
        "exit_0": exit_code == 0,
    }
    report = {
        "command": " ".join(sys.argv),
        "checkpoint": str(args.checkpoint) if args.checkpoint else "tiny random model (made by the script)",
        "settings": {k: getattr(args, k) for k in ("requests", "concurrency", "hang_up", "slow", "warmup")}
        | {"body_timeout_s": BODY_TIMEOUT_S, "server_threads": 1, "cores": os.cpu_count()},
        "targets": TARGETS,
        "summary": summary,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": describe(), **report}, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    sys.exit(0 if all(summary["met"].values()) else 1)


if __name__ == "__main__":
    main()
