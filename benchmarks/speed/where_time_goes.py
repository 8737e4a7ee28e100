"""Where the time of `Translator.translate` goes on a trained checkpoint, text in and text out (issue 81, item 1).

    python -m benchmarks.speed.where_time_goes --checkpoint CK [--threads 1] [--runs 3] [--out FILE]

The configurations of `decode.py`'s checkpoint rows (greedy at batch 1, 16 and 64, beam 4 at batch 16; the first
test_2016_flickr sentences sorted by length, longest first, one `translate` call a batch, as that benchmark calls
it), plus greedy at batch 16 with evidence on (what documents are translated with). Each run is timed whole, then
split by wall-clock timers around the functions of each phase: a stack of them, so each phase is charged its own
time only (the decoder steps' time is not also the search's):

- text in: segmentation (`Reader.layout`: lines, sentences, parts too long), kept-span scanning (`kept_spans`,
  `find_kept`), steering planning (`plan`), tokenisation (`encode_source_pieces`), the rest of `Reader.split`;
- the search: the encoder (`ModelDoor.encode`), decoder steps (`BoundDecoder.features`: embeddings, layers, final
  norm), the output projection (`BoundDecoder.project`), the log-softmax over the vocabulary, the cache's reorder
  (`KVCache.reorder`: finished rows dropped, beams reordered), the length and EOS rules (`TokenRules.apply_`), choosing
  the tokens (`top_k`), and the rest of the search's bookkeeping (what `ModelDoor.search` spends outside those:
  beam scores, finished hypotheses, the steps' history);
- text out: detokenisation (`decode_target`), joining segments back into texts (`Split.joined`);
- evidence: the teacher-forced pass and the alignment read from it (`ModelDoor.teacher_forced`, `explain`);
- other: what `translate` spends outside all of these (batching by length, building the results).

The timers cost about a microsecond a call; the unwrapped run's median is reported beside the wrapped one's.
Then the decoder steps alone under `torch.profiler`: their ATen operators per step at each batch (what item 3 is to
halve) and their self time by kind (matrix products, attention, softmax, LayerNorm, elementwise, and views,
allocations and wrappers: the per-operator overhead). Results: benchmarks/results/where_time_goes.json.
"""

import argparse
import contextlib
import importlib
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.common.host import describe
from benchmarks.speed.profile_step import category

CONFIGS = [  # name, batch size, beam size, sentences, evidence
    ("greedy-b1", 1, 1, 32, False),
    ("greedy-b16", 16, 1, 128, False),
    ("greedy-b64", 64, 1, 256, False),
    ("beam4-b16", 16, 4, 64, False),
    ("greedy-b16-evidence", 16, 1, 128, True),
]
PHASES = [  # (phase, owner, attribute): what is wrapped; an owner is a class, a module or the translator's tokenizer
    ("text in: segmentation", "tnmt.translate.reading:Reader", "layout"),
    ("text in: kept spans", "tnmt.translate.steering", "kept_spans"),
    ("text in: kept spans", "tnmt.translate.kept", "find_kept"),
    ("text in: steering plan", "tnmt.translate.steering", "plan"),
    ("text in: tokenisation", "tokenizer", "encode_source_pieces"),
    ("text in: the rest of the split", "tnmt.translate.reading:Reader", "split"),
    ("search: encoder", "tnmt.translate.door:ModelDoor", "encode"),
    ("search: decoder steps", "tnmt.model:BoundDecoder", "features"),
    ("search: cache reorder", "tnmt.blocks.kv_cache:KVCache", "reorder"),
    ("search: length and EOS rules", "tnmt.decode.rules:TokenRules", "apply_"),
    ("search: choosing tokens (top-k)", "tnmt.decode.top_k", "top_k"),
    ("search: bookkeeping", "tnmt.translate.door:ModelDoor", "search"),
    ("text out: detokenisation", "tokenizer", "decode_target"),
    ("text out: joining", "tnmt.translate.whole:Split", "joined"),
    ("evidence", "tnmt.translate.door:ModelDoor", "teacher_forced"),
    ("evidence", "tnmt.translate.evidence", "explain"),
]
RESULTS = Path(__file__).resolve().parents[1] / "results" / "where_time_goes.json"
PROJECTION, SOFTMAX, OTHER = "search: output projection", "search: log-softmax", "other"


class Timers:
    """Wall time charged to the innermost phase running: `charged(phase, fn)` wraps `fn`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.stack: list[list] = []  # [phase, started, time of the phases inside it]

    def charged(self, phase: str, fn: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            self.stack.append([phase, time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                name, started, inner = self.stack.pop()
                spent = time.perf_counter() - started
                self.seconds[name] += spent - inner
                if self.stack:
                    self.stack[-1][2] += spent

        return wrapper


def _owner(name: str, translator):
    if name == "tokenizer":
        return translator.tokenizer
    module, _, attribute = name.partition(":")
    found = importlib.import_module(module)
    return getattr(found, attribute) if attribute else found


@contextlib.contextmanager
def wrapped(translator, timers: Timers) -> Iterator[None]:
    """Every function of `PHASES` charged to its phase, wherever the package looks it up (a function imported by
    name into other modules is replaced there too), the projection and log-softmax as well; undone after."""
    undo: list[tuple[object, str, object]] = []

    def swap(owner: object, attribute: str, value: object) -> None:
        undo.append((owner, attribute, getattr(owner, attribute)))
        setattr(owner, attribute, value)

    for phase, owner_name, attribute in PHASES:
        owner = _owner(owner_name, translator)
        original = getattr(owner, attribute)
        timed = timers.charged(phase, original)
        swap(owner, attribute, timed)
        if not isinstance(owner, type) and owner_name != "tokenizer":  # a module's function: its importers too
            for module in [m for name, m in sys.modules.items() if name.startswith("tnmt.") and m is not owner]:
                for key, value in list(vars(module).items()):
                    if value is original:
                        swap(module, key, timed)
    door = translator.door
    swap(door, "decoder", door.decoder._replace(project=timers.charged(PROJECTION, door.decoder.project)))
    swap(torch.Tensor, "log_softmax", timers.charged(SOFTMAX, torch.Tensor.log_softmax))
    try:
        yield
    finally:
        for owner, attribute, value in reversed(undo):
            setattr(owner, attribute, value)


def batches(texts: list[str], batch: int, n: int) -> list[list[str]]:
    chosen = sorted(texts[:n], key=lambda t: -len(t.split()))
    return [chosen[i : i + batch] for i in range(0, n, batch)]


def run_once(translator, config: tuple, texts: list[str]) -> float:
    name, batch, beam, n, evidence = config
    settings = replace(translator.decode, beam_size=beam, batch_size=batch)
    start = time.perf_counter()
    for chunk in batches(texts, batch, n):
        translator.translations(chunk, settings, evidence=evidence)
    return time.perf_counter() - start


def step_operators(translator, batch: int, texts: list[str]) -> dict:
    """The decoder steps of one greedy search of `batch` sentences under the profiler: ATen operators per step
    and their self time by kind, in microseconds per step."""
    from torch.profiler import ProfilerActivity, profile

    settings = replace(translator.decode, beam_size=1, batch_size=batch)
    chunk = batches(texts, batch, batch)[0]
    steps = [0]
    features = type(translator.door.decoder).features

    def counted(*args, **kwargs):
        steps[0] += 1
        with torch.profiler.record_function("decoder step"):
            return features(*args, **kwargs)

    type(translator.door.decoder).features = counted
    try:
        translator.translations(chunk, settings)  # warm-up
        steps[0] = 0
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            translator.translations(chunk, settings)
    finally:
        type(translator.door.decoder).features = features
    inside = [e for e in prof.events() if _within(e)]
    ops = [e for e in inside if e.name.startswith(("aten::", "mkldnn::", "quantized::")) and _is_top(e)]
    kinds: dict[str, float] = defaultdict(float)
    for event in ops:
        kinds[category(event.name)] += event.self_cpu_time_total
    names: dict[str, int] = defaultdict(int)
    for event in ops:
        names[event.name] += 1
    n = max(steps[0], 1)
    return {
        "steps": steps[0],
        "aten_ops_per_step": round(len(ops) / n, 1),
        "self_us_per_step_by_kind": {k: round(v / n, 1) for k, v in sorted(kinds.items(), key=lambda x: -x[1])},
        "ops_per_step": {k: round(v / n, 2) for k, v in sorted(names.items(), key=lambda x: -x[1])[:25]},
    }


def _within(event) -> bool:
    """Whether `event` ran inside a "decoder step" range."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name == "decoder step":
            return True
        parent = parent.cpu_parent
    return False


def _is_top(event) -> bool:
    """An operator called from Python, not from inside another operator (what a step's count means)."""
    parent = event.cpu_parent
    return parent is None or not parent.name.startswith(("aten::", "mkldnn::", "quantized::"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--configs", default=",".join(c[0] for c in CONFIGS), help="comma-separated names")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "where_time_goes.json"
    )
    args = parser.parse_args()

    from benchmarks.quality.markup import data_dir, read
    from tnmt import Translator

    torch.set_num_threads(args.threads)
    translator = Translator.from_checkpoint(args.checkpoint)
    texts = read(data_dir() / "test_2016_flickr.en.gz")
    report = {"command": " ".join(["python -m benchmarks.speed.where_time_goes", *sys.argv[1:]]), "host": describe()}
    report.update(checkpoint=str(args.checkpoint), threads=args.threads, runs=args.runs, configurations={})
    for config in [c for c in CONFIGS if c[0] in args.configs.split(",")]:
        run_once(translator, config, texts)  # warm-up
        plain = [run_once(translator, config, texts) for _ in range(args.runs)]
        split: list[dict[str, float]] = []
        wrapped_s = []
        for _ in range(args.runs):
            timers = Timers()
            with wrapped(translator, timers):
                wrapped_s.append(run_once(translator, config, texts))
            timers.seconds[OTHER] = wrapped_s[-1] - sum(timers.seconds.values())
            split.append(dict(timers.seconds))
        median = statistics.median(wrapped_s)
        phases = {p: statistics.median(s.get(p, 0.0) for s in split) for p in {p for s in split for p in s}}
        name, *_, n, _ = config
        report["configurations"][name] = {
            "sentences": n,
            "seconds": round(statistics.median(plain), 4),
            "sentences_per_s": round(n / statistics.median(plain), 1),
            "seconds_timed": round(median, 4),
            "phases_ms": {p: round(1e3 * s, 2) for p, s in sorted(phases.items(), key=lambda x: -x[1])},
            "phases_pct": {p: round(100 * s / median, 1) for p, s in sorted(phases.items(), key=lambda x: -x[1])},
        }
        print(name, json.dumps(report["configurations"][name]["phases_pct"]), flush=True)
    report["decoder_steps"] = {f"greedy-b{b}": step_operators(translator, b, texts) for b in (1, 16, 64)}
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["decoder_steps"], indent=1))


if __name__ == "__main__":
    main()
