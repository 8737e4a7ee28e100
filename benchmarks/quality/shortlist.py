"""The vocabulary shortlist (data/shortlist.py) against the full vocabulary: BLEU of test_2016_flickr and speed.

    python -m benchmarks.quality.shortlist --checkpoint outputs/m30k/best [--runs 3] [--threads 1]

Issue 81's bound: BLEU within 0.1 of the full vocabulary, greedy and beam 4. For each setting the 1,000 sentences
are translated with the shortlist on and off (the checkpoint must have one: `tnmt shortlist`), the two taking turns
run by run; the report gives sacreBLEU (detokenised, cased) of each, the lines that differ, the candidates a batch
projects onto (mean and largest, against the vocabulary), and the median seconds of each. Writes
benchmarks/results/shortlist.json (`--out`).
"""

import argparse
import gzip
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

import sacrebleu
import torch

from benchmarks.common.host import describe
from benchmarks.speed.translate_file import data_dir
from tnmt.translate.translator import Translator

SETTINGS = {"greedy": {"beam_size": 1}, "beam4": {"beam_size": 4}}  # at the checkpoint's batch size


def read(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def candidate_sizes(translator: Translator, sources: list[str], batch_size: int) -> dict:
    """How many pieces each batch of `batch_size` sources (in the file's order) projects onto."""
    shortlist, sizes = translator.door.shortlist, []
    for start in range(0, len(sources), batch_size):
        ids = [i for text in sources[start : start + batch_size] for i in translator.tokenizer.encode_source(text)]
        candidates = shortlist.candidates(torch.tensor(ids), {translator.tokenizer.eos_id})
        sizes.append(shortlist.target_vocab_size if candidates is None else candidates.numel())
    return {"mean": round(statistics.mean(sizes), 1), "largest": max(sizes), "vocabulary": shortlist.target_vocab_size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "shortlist.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    translator = Translator.from_checkpoint(args.checkpoint)
    if translator.door.shortlist is None:
        raise SystemExit(f"{args.checkpoint}: has no shortlist (tnmt shortlist CHECKPOINT --prepared DIR)")
    sources, references = (read(data_dir() / f"test_2016_flickr.{lang}.gz") for lang in ("en", "de"))
    report = {
        "command": "python -m benchmarks.quality.shortlist " + " ".join(f"--{k} {v}" for k, v in vars(args).items()),
        "host": describe(),
        "checkpoint": str(args.checkpoint),
        "sentences": len(sources),
        "candidates_per_batch": candidate_sizes(translator, sources, translator.decode.batch_size),
        "settings": {},
    }
    for name, fields in SETTINGS.items():
        outputs, seconds = {}, {True: [], False: []}
        for _ in range(args.runs):
            for on in (True, False):
                settings = replace(translator.decode, shortlist=on, **fields)
                start = time.perf_counter()
                outputs[on] = [t.text for t in translator.translations(sources, settings)]
                seconds[on].append(time.perf_counter() - start)
        bleu = {on: sacrebleu.corpus_bleu(outputs[on], [references]).score for on in (True, False)}
        report["settings"][name] = {
            "bleu_shortlist": round(bleu[True], 2),
            "bleu_full": round(bleu[False], 2),
            "bleu_difference": round(bleu[True] - bleu[False], 2),
            "lines_differing": sum(a != b for a, b in zip(outputs[True], outputs[False], strict=True)),
            "seconds_shortlist": round(statistics.median(seconds[True]), 3),
            "seconds_full": round(statistics.median(seconds[False]), 3),
            "speedup": round(statistics.median(seconds[False]) / statistics.median(seconds[True]), 3),
        }
        print(name, json.dumps(report["settings"][name]))
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
