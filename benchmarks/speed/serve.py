"""`tnmt serve` under load on loopback: dynamic batching against one request = one batch.

    python -m benchmarks.speed.serve --checkpoint outputs/m30k_serve/best [--requests 2000] [--threads 1,2] \
        [--baseline ../wt-base]

For each mode (batching on; `--no-batching`, LibreTranslate's behaviour: every request its own decoder
batch) the script starts `python -m tnmt serve --checkpoint CKPT --port FREE --threads T` as a
subprocess and waits for `/ready`. A warm-up of `--warmup` requests at the highest concurrency follows,
longest sentences first (not measured: the first batches of each size allocate what later ones reuse).
Then, for each concurrency in `--concurrency` (1, 8, 32, 64), a client in a separate process (asyncio + aiohttp,
`concurrency` connections, each sending its next request when its previous answer arrives) sends
`--requests` single-sentence requests, `POST /v1/translate {"text": s}` with the checkpoint's own
decoding settings. With `--pairs en-de,de-fr,...` (a multilingual checkpoint: `--pairs all` takes every pair
/v1/models lists) request i asks for pair i mod n, `{"text": s, "source": ..., "target": ...}` with s from that
pair's source side, so the server's one batcher decodes batches that mix directions. Sentences: the
test_2016_flickr English side of Multi30k (`TNMT_DATA_DIR`, else ../shared/data/multi30k beside the
repository), in file order, cycling. A level sends no request after
`--level-seconds` (those in flight finish), so a run stops by itself; `--requests 2500` is the issue's
10,000 requests per mode.

Per level: sentences/s (answers 200 / wall time of the level), p50 / p99 latency of the answers 200,
errors by status (or exception name), the server's RSS (VmRSS) before and after, the CPU seconds the
server and the client used, and the mean sentences per decoder batch (from /metrics). After the last
level the server gets SIGTERM and must exit with 0.

Summary against the issue's targets at concurrency 64: batching on >= 3x the sentences/s of batching
off, p99 <= 1 s (on the Multi30k model), 0 errors, RSS growth < 5% with batching on (before the first
level -> after the last, i.e. after the warm-up).

Every mode runs at every thread count of `--threads` (default 1 and 2) in the same invocation, and the
summary compares each mode at its best thread count (the most sentences/s at the highest concurrency),
so neither side is handicapped: the client shares the machine's cores with the server, which can make the
second torch thread cost more than it gives.

What the server itself costs: each run also translates `--offline-sentences` test sentences one at a time
offline (`Translator.translations` with the evidence, the checkpoint's settings, the run's torch threads, after a
warm-up), and `server_cost_ms` is the mean latency at concurrency 1 less that offline mean. `--baseline DIR` runs
every mode and thread count again with the tnmt of another checkout (DIR/src, e.g. a git worktree of main),
right after this checkout's, and the summary gives this/base sentences/s at every concurrency and both server
costs.

Why aiohttp and not httpx: the load generator must not be what is measured. On 2 cores httpx's client
spent 2.1 ms of CPU per request (aiohttp: 0.24 ms). In 10 of 27 levels at concurrency 64 its event loop
fell behind (stalls of 20-50 ms, over and over), requests waited up to 1.8 s in the client before the
server saw them (the server's own event loop lagged < 10 ms), and that wait was the whole p99 tail
(NOTEBOOK.md, "The p99 tail was the load generator").
Results go to benchmarks/results/serve.json and a markdown table on stdout.
"""

import argparse
import asyncio
import gzip
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from importlib.metadata import version
from pathlib import Path

from benchmarks.common.host import describe

MODES = {"batching": [], "no-batching": ["--no-batching"]}
CONCURRENCY = [1, 8, 32, 64]
TARGETS = {"speedup": 3.0, "p99_s": 1.0, "errors": 0, "rss_growth_pct": 5.0}
OFFLINE_WARMUP = 20  # sentences translated offline before timing


def data_dir() -> Path:
    """The Multi30k copy: `TNMT_DATA_DIR`, else ../shared/data/multi30k beside the repository."""
    default = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"
    return Path(os.environ.get("TNMT_DATA_DIR", default))


def read_sentences(language: str = "en") -> list[str]:
    with gzip.open(data_dir() / f"test_2016_flickr.{language}.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def requests_of(pairs: list[str]) -> list[dict]:
    """The request bodies the client cycles through: English sentences alone, or with `pairs` each sentence of
    test_2016_flickr for each pair in turn (request i: pair i mod n, from its source side)."""
    if not pairs:
        return [{"text": s} for s in read_sentences()]
    sides = {pair: read_sentences(pair.split("-")[0]) for pair in pairs}
    count = min(len(side) for side in sides.values())
    return [
        {"text": sides[pair][i], "source": pair.split("-")[0], "target": pair.split("-")[1]}
        for i in range(count)
        for pair in pairs
    ]


# --- the client (its own process: its CPU shows up as the load a real client puts on the machine) ---


async def load(
    url: str,
    *,
    concurrency: int,
    requests: int,
    seconds: float,
    beam_size: int | None,
    longest_first: bool,
    pairs: list[str],
) -> dict:
    """Send `requests` sentences over `concurrency` connections, at most `seconds` of sending."""
    import aiohttp

    bodies = requests_of(pairs)
    if longest_first:
        bodies.sort(key=lambda body: len(body["text"]), reverse=True)
    tickets = iter(range(requests))  # shared by the workers: each takes the next sentence index
    deadline = time.monotonic() + seconds
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    extra = {} if beam_size is None else {"beam_size": beam_size}

    async def worker(client: aiohttp.ClientSession) -> None:
        for i in tickets:
            if time.monotonic() > deadline:
                return
            start = time.perf_counter()
            try:
                async with client.post(url, json={**bodies[i % len(bodies)], **extra}) as response:
                    body = await response.json() if response.status == 200 else None
                ok = body is not None and len(body["translations"]) == 1
                outcome = "200" if ok else str(response.status)
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError) as error:
                outcome = type(error).__name__
            if outcome == "200":
                latencies.append(time.perf_counter() - start)
            else:
                errors[outcome] += 1

    # The client's timeout lies past the server's deadline (30 s by default), so a slow answer is a 504.
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60.0)) as client:
        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"ok": len(latencies), "errors": dict(errors), "wall_s": wall, "cpu_s": cpu, "latencies_s": latencies}


def client_main(args: argparse.Namespace) -> None:
    result = asyncio.run(
        load(
            f"http://127.0.0.1:{args.port}/v1/translate",
            concurrency=args.client,
            requests=args.requests,
            seconds=args.level_seconds,
            beam_size=args.beam_size,
            longest_first=args.longest_first,
            pairs=args.pairs.split(",") if args.pairs else [],
        )
    )
    print(json.dumps(result))


# --- the server ---


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """VmRSS of a process (`field="VmHWM"`: its peak so far), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


def get(port: int, path: str, timeout: float = 30.0) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
        return response.read()


def batch_totals(port: int) -> tuple[float, float]:
    """(decoder batches, sentences in them) so far, from the server's Prometheus histogram."""
    values = {}
    for line in get(port, "/metrics").decode().splitlines():
        name, _, value = line.partition(" ")
        if name in ("tnmt_batch_sentences_count", "tnmt_batch_sentences_sum"):
            values[name] = float(value)
    return values["tnmt_batch_sentences_count"], values["tnmt_batch_sentences_sum"]


def checkout_env(checkout: Path | None) -> dict[str, str]:
    """The environment that imports tnmt from `checkout`/src (None: this checkout, as installed)."""
    if checkout is None:
        return dict(os.environ)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout / "src"), os.environ.get("PYTHONPATH", "")])}


def start_server(
    checkpoint: Path, flags: list[str], *, threads: int, log: Path, timeout: float, checkout: Path | None = None
):
    """`tnmt serve` (of `checkout`, default this one) on a free port, once `/ready` answers 200; (process, port)."""
    port = free_port()
    command = [sys.executable, "-m", "tnmt", "serve", "--checkpoint", str(checkpoint), "--port", str(port)]
    command += ["--threads", str(threads), *flags]
    env = checkout_env(checkout)
    server = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            get(port, "/ready", timeout=max(deadline - time.monotonic(), 1))
            return server, port
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    server.kill()
    raise RuntimeError(f"the server was not ready within {timeout:g} s:\n{log.read_text()[-3000:]}")


def stop_server(server: subprocess.Popen, timeout: float = 90.0) -> int | None:
    """SIGTERM, then the exit status (None: it did not exit within `timeout` and was killed)."""
    server.send_signal(signal.SIGTERM)
    try:
        return server.wait(timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        return None


# --- the same sentences offline: what a request costs without the server ---


def offline_main(args: argparse.Namespace) -> None:
    """One sentence at a time through `Translator.translations` with the evidence, as `/v1/translate` answers it
    (the checkpoint's settings), after a warm-up; the mean and median milliseconds per sentence as JSON."""
    import torch

    from tnmt import Translator  # the package's export: its module moved in issue 63 (a --baseline may be older)

    torch.set_num_threads(args.threads_offline)
    translator = Translator.from_checkpoint(args.checkpoint)
    sentences = read_sentences()
    times = []
    for i in range(OFFLINE_WARMUP + args.offline):
        start = time.perf_counter()
        translator.translations([sentences[i % len(sentences)]], evidence=True)
        if i >= OFFLINE_WARMUP:
            times.append(time.perf_counter() - start)
    print(json.dumps({"mean_ms": 1000 * statistics.fmean(times), "median_ms": 1000 * statistics.median(times)}))


def offline_cost(args: argparse.Namespace, threads: int, checkout: Path | None) -> dict:
    command = [sys.executable, "-m", __spec__.name, "--checkpoint", str(args.checkpoint)]
    command += ["--offline", str(args.offline_sentences), "--threads-offline", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=checkout_env(checkout))
    if done.returncode != 0:
        raise RuntimeError(f"the offline run failed:\n{done.stderr[-3000:]}")
    return {key: round(value, 3) for key, value in json.loads(done.stdout).items()}


# --- one mode: a server, the levels, the summary numbers ---


def run_client(
    port: int, concurrency: int, requests: int, args: argparse.Namespace, *, longest_first: bool = False
) -> dict:
    command = [sys.executable, "-m", __spec__.name, "--client", str(concurrency), "--port", str(port)]
    command += ["--requests", str(requests), "--level-seconds", str(args.level_seconds)]
    command += ["--longest-first"] if longest_first else []
    command += ["--pairs", args.pairs] if args.pairs else []
    if args.beam_size is not None:
        command += ["--beam-size", str(args.beam_size)]
    # Past the level's cap, the requests in flight need at most the client's timeout (60 s).
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.level_seconds + 120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the client failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def level(server: subprocess.Popen, port: int, concurrency: int, args: argparse.Namespace) -> dict:
    """One concurrency level: the client's numbers, with RSS and batch sizes from the server's side."""
    rss_before, (batches_before, sentences_before) = rss_mb(server.pid), batch_totals(port)
    cpu_before = cpu_s(server.pid)
    result = run_client(port, concurrency, args.requests, args)
    cpu_after = cpu_s(server.pid)
    rss_after, (batches_after, sentences_after) = rss_mb(server.pid), batch_totals(port)
    latencies = sorted(result.pop("latencies_s"))
    p99 = statistics.quantiles(latencies, n=100, method="inclusive")[98] if len(latencies) > 1 else None
    batches = batches_after - batches_before
    return {
        "requests": result["ok"] + sum(result["errors"].values()),
        "ok": result["ok"],
        "errors": result["errors"],
        "capped": result["ok"] + sum(result["errors"].values()) < args.requests,
        "wall_s": round(result["wall_s"], 2),
        "sentences_per_s": round(result["ok"] / result["wall_s"], 2),
        "p50_s": round(statistics.median(latencies), 4) if latencies else None,
        "mean_s": round(statistics.fmean(latencies), 5) if latencies else None,
        "p99_s": round(p99, 4) if p99 is not None else None,
        "mean_batch_sentences": round((sentences_after - sentences_before) / batches, 2) if batches else None,
        "server_cpu_s": round(cpu_after - cpu_before, 2),  # over the wall time: cores it kept busy
        "client_cpu_s": round(result["cpu_s"], 2),
        "rss_mb_before": round(rss_before, 1),
        "rss_mb_after": round(rss_after, 1),
        "load_average_after": round(os.getloadavg()[0], 2),
    }


def run_mode(mode: str, threads: int, args: argparse.Namespace, work: Path, checkout: Path | None = None) -> dict:
    side = "base" if checkout is not None else "this"
    log = work / f"server-{mode}-{side}-{threads}.log"
    server, port = start_server(
        args.checkpoint, MODES[mode], threads=threads, log=log, timeout=args.start_seconds, checkout=checkout
    )
    try:
        models = json.loads(get(port, "/v1/models"))["models"]
        model = models[0]
        if args.pairs == "all":
            args.pairs = ",".join(m["id"] for m in models)
        ready_rss = rss_mb(server.pid)
        # Not measured: the first batches of each size allocate what later ones reuse, so a warm-up at the
        # highest concurrency separates that one-off growth from growth over the run (a leak). Longest
        # sentences first: a batch whose output passes 32 tokens doubles its KV cache (~30 MB at 32 x beam 4).
        run_client(port, max(args.concurrency), args.warmup, args, longest_first=True)
        warm_rss = rss_mb(server.pid)
        levels = {}
        for concurrency in args.concurrency:
            levels[str(concurrency)] = level(server, port, concurrency, args)
            report = json.dumps(levels[str(concurrency)])
            print(f"{mode} ({side}) threads={threads} c={concurrency}: {report}", file=sys.stderr)
    except BaseException:
        server.kill()
        print(log.read_text()[-3000:], file=sys.stderr)
        raise
    exit_code = stop_server(server)
    first, last = levels[str(args.concurrency[0])], levels[str(args.concurrency[-1])]
    offline = offline_cost(args, threads, checkout)
    single = levels.get("1")
    return {
        "mode": mode,
        "checkout": side,
        "threads": threads,
        "offline": offline,
        # what the server adds to one sentence at concurrency 1: its mean latency less the same translation offline
        "server_cost_ms": round(1000 * single["mean_s"] - offline["mean_ms"], 2) if single else None,
        "exit_code_after_sigterm": exit_code,
        "rss_mb_ready": round(ready_rss, 1),
        "rss_mb_after_warmup": round(warm_rss, 1),
        "rss_growth_pct": round(100 * (last["rss_mb_after"] / first["rss_mb_before"] - 1), 2),
        "server_log_tail": log.read_text()[-2000:],
        "model": {key: model[key] for key in ("id", "parameters", "decoding")},
        "levels": levels,
    }


# --- report ---


def best(runs: dict, mode: str, concurrency: int) -> dict | None:
    """The run of `mode` with the most sentences/s at `concurrency`: each mode at its best thread count."""
    candidates = [run for run in runs.values() if run["mode"] == mode and str(concurrency) in run["levels"]]
    return max(candidates, key=lambda run: run["levels"][str(concurrency)]["sentences_per_s"], default=None)


def summary(runs: dict, concurrency: int) -> dict:
    """The issue's targets at the highest concurrency measured (64 by default), best thread count per mode."""
    best_on, best_off = best(runs, "batching", concurrency), best(runs, "no-batching", concurrency)
    on, off = (run["levels"][str(concurrency)] if run else None for run in (best_on, best_off))
    result: dict = {"concurrency": concurrency}
    result["best_threads"] = {run["mode"]: run["threads"] for run in (best_on, best_off) if run}
    if on and off and off["sentences_per_s"]:
        result["speedup"] = round(on["sentences_per_s"] / off["sentences_per_s"], 2)
    if on:
        result["p99_s"] = on["p99_s"]
        result["rss_growth_pct"] = best_on["rss_growth_pct"]
    result["errors"] = sum(sum(lv["errors"].values()) for run in runs.values() for lv in run["levels"].values())
    result["clean_exits"] = all(run["exit_code_after_sigterm"] == 0 for run in runs.values())
    met = {
        "speedup": lambda v: v >= TARGETS["speedup"],
        "p99_s": lambda v: v is not None and v <= TARGETS["p99_s"],
        "errors": lambda v: v == TARGETS["errors"],
        "rss_growth_pct": lambda v: v < TARGETS["rss_growth_pct"],
    }
    result["met"] = {key: check(result[key]) for key, check in met.items() if key in result}
    return result


def against_baseline(runs: dict) -> dict:
    """Per mode and thread count: this checkout's sentences/s at each concurrency over the baseline's, and the
    server's own cost per request at concurrency 1 (ms over offline) of both."""
    compared = {}
    for key, run in runs.items():
        base = runs.get(key.replace("/", "-base/", 1))
        if run["checkout"] != "this" or base is None:
            continue
        ratios = {
            c: round(lv["sentences_per_s"] / base["levels"][c]["sentences_per_s"], 3)
            for c, lv in run["levels"].items()
            if base["levels"].get(c, {}).get("sentences_per_s")
        }
        compared[key] = {
            "sentences_per_s_ratio": ratios,
            "server_cost_ms": {"this": run["server_cost_ms"], "base": base["server_cost_ms"]},
            "offline_mean_ms": {"this": run["offline"]["mean_ms"], "base": base["offline"]["mean_ms"]},
        }
    return compared


def table(runs: dict, summary: dict) -> str:
    lines = [
        "| mode | threads | concurrency | sentences/s | p50 (s) | p99 (s) | errors | sentences/batch "
        "| RSS MiB before -> after |",
        "|---" * 9 + "|",
    ]
    for run in runs.values():
        for concurrency, lv in run["levels"].items():
            errors = ", ".join(f"{k}: {v}" for k, v in lv["errors"].items()) or "0"
            mode = run["mode"] + ("" if run.get("checkout", "this") == "this" else " (base)")
            cells = [mode, run["threads"], concurrency, lv["sentences_per_s"], lv["p50_s"], lv["p99_s"], errors]
            cells += [lv["mean_batch_sentences"], f"{lv['rss_mb_before']} -> {lv['rss_mb_after']}"]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    threads = ", ".join(f"{mode} {n}" for mode, n in summary["best_threads"].items())
    lines += ["", f"| target at concurrency {summary['concurrency']} (best threads: {threads}) | measured | met |"]
    lines += ["|---|---|---|"]
    wanted = {"speedup": ">= 3x", "p99_s": "p99 <= 1 s", "errors": "0 errors", "rss_growth_pct": "RSS growth < 5%"}
    for key, label in wanted.items():
        if key in summary:
            lines.append(f"| {label} | {summary[key]} | {'yes' if summary['met'][key] else 'NO'} |")
    lines.append(f"| exit 0 after SIGTERM | {summary['clean_exits']} | {'yes' if summary['clean_exits'] else 'NO'} |")
    return "\n".join(lines)


def machine(threads: list[int]) -> dict:
    return {**describe(), "server_torch_threads": threads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, help="a checkpoint that names its languages")
    parser.add_argument("--requests", type=int, default=2000, help="per concurrency level")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)), help="comma-separated levels")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ", ".join(MODES))
    parser.add_argument("--threads", default="1,2", help="comma-separated torch thread counts of the server")
    parser.add_argument("--beam-size", type=int, help="sent with every request (default: the checkpoint's)")
    parser.add_argument("--warmup", type=int, default=256, help="requests at the highest concurrency, not measured")
    parser.add_argument("--level-seconds", type=float, default=120.0, help="a level sends no request past this")
    parser.add_argument("--start-seconds", type=float, default=300.0, help="how long the server may take to be ready")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "serve.json")
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)  # run as the client, this concurrency
    parser.add_argument("--longest-first", action="store_true", help=argparse.SUPPRESS)  # the client's warm-up order
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--pairs", help="comma-separated pairs to cycle through (all: every pair /v1/models lists)")
    parser.add_argument("--baseline", type=Path, help="another tnmt checkout, its server run beside this one's")
    parser.add_argument("--offline-sentences", type=int, default=200, help="timed one by one offline per run")
    parser.add_argument("--offline", type=int, help=argparse.SUPPRESS)  # run as the offline timer, this many
    parser.add_argument("--threads-offline", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args)
        return
    if args.offline:
        offline_main(args)
        return
    if args.checkpoint is None:
        parser.error("--checkpoint is required")
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.threads = [int(t) for t in args.threads.split(",")]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        checkouts = [None] if args.baseline is None else [None, args.baseline.resolve()]
        runs = {
            f"{mode}{'' if checkout is None else '-base'}/{threads}": run_mode(mode, threads, args, Path(tmp), checkout)
            for mode in args.modes.split(",")
            for threads in args.threads
            for checkout in checkouts  # side by side: this checkout's server, then the baseline's
        }
    result = summary({key: run for key, run in runs.items() if run["checkout"] == "this"}, max(args.concurrency))
    if args.baseline is not None:
        result["against_baseline"] = against_baseline(runs)
    report = {
        "command": " ".join(sys.argv),
        "checkpoint": str(args.checkpoint.resolve()),
        "settings": {key: getattr(args, key) for key in ("requests", "concurrency", "threads", "beam_size", "warmup")}
        | {"level_seconds": args.level_seconds, "sentences": "test_2016_flickr.en, one per request, cycling"}
        | ({"pairs": args.pairs.split(","), "sentences": "test_2016_flickr, each pair in turn"} if args.pairs else {}),
        "machine": machine(args.threads),
        "versions": {name: version(name) for name in ("torch", "fastapi", "uvicorn", "aiohttp")},
        "load_average_before_after": [load_before, os.getloadavg()[0]],
        "baseline": None if args.baseline is None else str(args.baseline.resolve()),
        "targets": TARGETS,
        "summary": result,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(runs, result))


if __name__ == "__main__":
    main()
