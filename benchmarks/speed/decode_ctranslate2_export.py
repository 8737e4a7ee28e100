"""A trained checkpoint decoded by tnmt (float32, int8) and by its CTranslate2 export: speed, agreement, BLEU.

    python -m benchmarks.speed.decode_ctranslate2_export CHECKPOINT [--sentences 1000] [--runs 3] [--threads 2]

Exports CHECKPOINT (e.g. outputs/multi30k_en_de/best) with `tnmt export ctranslate2`, in float32 and
int8, then translates the first `--sentences` lines of Multi30k test_2016_flickr.en (`TNMT_DATA_DIR`,
else ../shared/data/multi30k) with tnmt's `Translator` (float32, and int8: `quantize="int8"`, torch.ao
dynamic quantisation) and with `CTranslate2Translator`: greedy, and
beam 4 with the recipe's GNMT alpha 0.6. Both get the same text, tokeniser, batches of 64 sentences
and length limits (source length + 50). Reported per system and search: sentences and output tokens
per second (median wall time of `--runs` runs after one warm-up, tokenisation included), the share of
outputs identical to tnmt's, and sacreBLEU against test_2016_flickr.de. CTranslate2's float32 greedy
output is tnmt's exactly; its beam search ranks by log P / |Y|^alpha instead of the GNMT penalty, so
its beam outputs may differ (see src/tnmt/interop/ctranslate2.py). Results go to
benchmarks/results/decode_ctranslate2_export.json and a markdown table on stdout.
"""

import argparse
import gzip
import json
import os
import statistics
import tempfile
import time
from dataclasses import asdict, replace
from importlib.metadata import version
from pathlib import Path

import torch

from benchmarks.common.host import describe
from tnmt.evaluate import score
from tnmt.interop.ctranslate2 import CTranslate2Translator, export_ctranslate2
from tnmt.translate.translator import Translator

SEARCHES = [("greedy", dict(beam_size=1)), ("beam 4, alpha 0.6", dict(beam_size=4, length_penalty=0.6))]
BATCH_SIZE = 64
RESULTS = Path(__file__).resolve().parents[1] / "results" / "decode_ctranslate2_export.json"


def data_dir() -> Path:
    default = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"
    return Path(os.environ.get("TNMT_DATA_DIR", default))


def read_gz(path: Path, n: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][:n]


def timed(translator, texts: list[str], options: dict, runs: int) -> tuple[float, list[str]]:
    """Median seconds of `runs` translations after a warm-up, and the output."""
    settings = replace(translator.decode, batch_size=BATCH_SIZE, **options)
    outputs = translator.translate(texts, settings)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        translator.translate(texts, settings)
        times.append(time.perf_counter() - start)
    return statistics.median(times), outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    data = data_dir()
    sources = read_gz(data / "test_2016_flickr.en.gz", args.sentences)
    references = read_gz(data / "test_2016_flickr.de.gz", args.sentences)
    torch.set_num_threads(args.threads)
    tnmt = Translator.from_checkpoint(args.checkpoint)
    with tempfile.TemporaryDirectory() as work:
        systems = {
            "tnmt": tnmt,
            "tnmt-int8": Translator.from_checkpoint(args.checkpoint, quantize="int8"),
        }
        for quantization in ("float32", "int8"):
            out = export_ctranslate2(args.checkpoint, Path(work) / quantization, quantization=quantization)
            systems[f"ct2-{quantization}"] = CTranslate2Translator(out, threads=args.threads)
        rows = []
        for search, options in SEARCHES:
            reference_outputs = None
            for system, translator in systems.items():
                seconds, outputs = timed(translator, sources, options, args.runs)
                if system == "tnmt":
                    reference_outputs = outputs
                tokens = sum(len(tnmt.tokenizer.encode_target(line)) + 1 for line in outputs)  # re-encoded, + EOS
                rows.append(
                    dict(
                        system=system,
                        search=search,
                        seconds=round(seconds, 3),
                        sentences_per_second=round(len(sources) / seconds, 1),
                        tokens_per_second=round(tokens / seconds, 1),
                        identical_to_tnmt=round(
                            sum(a == b for a, b in zip(outputs, reference_outputs, strict=True)) / len(sources), 4
                        ),
                        bleu=round(score(outputs, references).bleu, 2),
                    )
                )
                print(rows[-1], flush=True)
    result = dict(
        checkpoint=str(args.checkpoint),
        model=asdict(tnmt.model.config),
        sentences=len(sources),
        batch_size=BATCH_SIZE,
        threads=args.threads,
        runs=args.runs,
        machine=dict(
            **describe(),
            load_average=os.getloadavg(),  # other processes on a shared machine slow every system
        ),
        versions={name: version(name) for name in ("torch", "ctranslate2")},
        results=rows,
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print("\n| search | system | sentences/s | tokens/s | identical to tnmt | BLEU |\n|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['search']} | {r['system']} | {r['sentences_per_second']} | {r['tokens_per_second']} "
            f"| {r['identical_to_tnmt']:.1%} | {r['bleu']} |"
        )
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
