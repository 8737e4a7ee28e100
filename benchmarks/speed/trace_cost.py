"""What a step-by-step trace (`Translator.trace`, `/v1/explain`, `tnmt explain`) and a look inside the model
(`tnmt.views.inside.inside`, `/v1/inspect`, `tnmt inspect`) cost against translating alone.

    python -m benchmarks.speed.trace_cost [--checkpoint DIR] [--sentences 40] [--runs 3] [--threads 1]

Each of the first `--sentences` test_2016_flickr sentences (Multi30k from `TNMT_DATA_DIR`, else
../shared/data/multi30k) is translated alone (batch 1, as a person typing on the page) and traced
(top_k 5) and looked inside (its translation, then the recorded forward pass), greedy and beam 4; the trace
and the look inside are also turned into their endpoints' JSON. Without `--checkpoint`
the model is decode.py's random d 256 model (3+3 layers, 4 heads, vocabulary 8000) behind a sentencepiece
model trained here on the Multi30k training text, with outputs capped at 32 tokens. A figure is the median
over `--runs` rounds of the round's total seconds; each round alternates translate, trace and inspect per
sentence.
Tracing when it is off (the searches' `recorder is None` checks) is measured by `benchmarks/speed/decode.py
--baseline` instead. Results go to benchmarks/results/trace_cost.json.
"""

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.common.host import describe
from benchmarks.speed.decode import data_dir, read_gz, tnmt_model
from tnmt.config import DecodeConfig
from tnmt.data.tokenizer import Tokenizer
from tnmt.translate.translator import Translator
from tnmt.views.inside import inside, inside_dict
from tnmt.views.trace import explanation

TOP_K = 5
RESULTS = Path(__file__).resolve().parents[1] / "results" / "trace_cost.json"


def translator(checkpoint: Path | None) -> Translator:
    if checkpoint is not None:
        return Translator.from_checkpoint(checkpoint)
    texts = read_gz(data_dir() / "train.en.gz")[:20000] + read_gz(data_dir() / "train.de.gz")[:20000]
    tokenizer = Tokenizer.train(texts, vocab_size=8000)
    return Translator(tnmt_model(quantize=False), tokenizer, DecodeConfig(max_len=32))


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def round_seconds(engine: Translator, sentences: list[str], settings: DecodeConfig) -> dict[str, float]:
    """One round: each sentence translated, traced and looked inside, and those turned into JSON, alternately."""
    totals = {"translate": 0.0, "trace": 0.0, "json": 0.0, "inspect": 0.0, "inspect_json": 0.0}
    piece, config = lambda i: engine.tokenizer.target_pieces([i])[0], engine.model.config  # noqa: E731
    for sentence in sentences:
        totals["translate"] += timed(lambda s=sentence: engine.translate([s], settings))
        start = time.perf_counter()
        trace = engine.trace(sentence, settings, top_k=TOP_K)
        totals["trace"] += time.perf_counter() - start
        totals["json"] += timed(lambda t=trace: json.dumps(explanation(t, engine.tokenizer, settings, TOP_K)))
        start = time.perf_counter()
        found = inside(engine, sentence, settings, top_k=TOP_K)
        totals["inspect"] += time.perf_counter() - start
        totals["inspect_json"] += timed(lambda f=found: json.dumps(inside_dict(f, piece, config=config, top_k=TOP_K)))
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    engine = translator(args.checkpoint)
    sentences = read_gz(data_dir() / "test_2016_flickr.en.gz")[: args.sentences]
    rows = {}
    for name, beam in (("greedy", 1), ("beam 4", 4)):
        settings = replace(engine.decode, beam_size=beam, batch_size=1)
        round_seconds(engine, sentences[:3], settings)  # warm-up
        rounds = [round_seconds(engine, sentences, settings) for _ in range(args.runs)]
        medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        rows[name] = {
            **{f"{key}_ms_per_sentence": 1000 * value / len(sentences) for key, value in medians.items()},
            "trace_over_translate": medians["trace"] / medians["translate"],
            "trace_and_json_over_translate": (medians["trace"] + medians["json"]) / medians["translate"],
            "inspect_over_translate": medians["inspect"] / medians["translate"],
            "inspect_and_json_over_translate": (medians["inspect"] + medians["inspect_json"]) / medians["translate"],
            "rounds": rounds,
        }
        print(f"{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in rows[name].items() if k != "rounds"))
    model = "checkpoint " + str(args.checkpoint) if args.checkpoint else "random d256, 3+3 layers, vocabulary 8000"
    settings = {"sentences": len(sentences), "runs": args.runs, "threads": args.threads, "top_k": TOP_K}
    result = {"host": describe(), "model": model, "settings": settings, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
