"""Train the Multi30k en->de recipe from scratch and measure BLEU against wall-clock time.

    python benchmarks/multi30k.py --minutes 45 120
    python benchmarks/multi30k.py --minutes 45 && python benchmarks/multi30k.py --minutes 120 --resume

Trains until the first budget, evaluates on test_2016_flickr, resumes (exactly: see train/loop.py)
until the next budget, evaluates again. `--resume` continues an earlier invocation's run and adds its
phases to the existing results, so other jobs can use the CPU between phases. Each evaluation reports,
for the best checkpoint (greedy and beam 4) and for the average of the last checkpoints (beam 4):
  * sacreBLEU on detokenised cased text, with its signature;
  * BLEU on lower-cased Moses-tokenised text against ../shared/data/multi30k/tok/ (the number
    Multi30k papers report), hypotheses normalised and tokenised with sacremoses the same way.
Writes benchmarks/results/multi30k.json.
"""

import argparse
import gzip
import json
import platform
import time
from pathlib import Path

import sacrebleu
import torch
from sacremoses import MosesPunctNormalizer, MosesTokenizer

from tnmt.checkpoint import average_checkpoints
from tnmt.config import DataConfig
from tnmt.data.corpus import read_parallel
from tnmt.data.dataset import corpus_files
from tnmt.data.multi30k import find_multi30k
from tnmt.decode.translator import Translator
from tnmt.evaluate import score
from tnmt.recipe import load_recipe
from tnmt.train.loop import train

REPO = Path(__file__).resolve().parent.parent


def tokenized_lowercase_bleu(hypotheses: list[str], tok_refs: list[str]) -> float:
    """BLEU on `lc.norm.tok` text: Moses punctuation normalisation, lower-casing, Moses tokenisation."""
    normalizer, tokenizer = MosesPunctNormalizer(lang="de"), MosesTokenizer(lang="de")
    tokenized = [tokenizer.tokenize(normalizer.normalize(h).lower(), return_str=True, escape=True) for h in hypotheses]
    return sacrebleu.corpus_bleu(tokenized, [tok_refs], tokenize="none", force=True).score


def evaluate_checkpoint(path: Path, test_src: list[str], refs: list[str], tok_refs: list[str], beam: int) -> dict:
    translator = Translator.from_checkpoint(path)
    start = time.monotonic()
    hypotheses = translator.translate(test_src, beam_size=beam)
    seconds = time.monotonic() - start
    scores = score(hypotheses, refs)
    return {
        "checkpoint": str(path.resolve().name),
        "beam_size": beam,
        "sacrebleu": round(scores.bleu, 2),
        "signature": scores.bleu_signature,
        "chrf": round(scores.chrf, 2),
        "tok_lc_bleu": round(tokenized_lowercase_bleu(hypotheses, tok_refs), 2),
        "decode_seconds": round(seconds, 1),
        "examples": hypotheses[:3],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[45, 120])
    parser.add_argument("--recipe", default=str(REPO / "configs" / "multi30k_en_de.toml"))
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench_multi30k")
    parser.add_argument("--average", type=int, default=5, help="average this many last checkpoints")
    parser.add_argument("--result", type=Path, default=REPO / "benchmarks" / "results" / "multi30k.json")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out, keep earlier phases")
    args = parser.parse_args()
    root = find_multi30k()
    if root is None:
        raise SystemExit("Multi30k not found: set TNMT_DATA_DIR")
    test = read_parallel(*corpus_files(DataConfig(), "test_2016_flickr"))
    with gzip.open(root / "tok" / "test_2016_flickr.lc.norm.tok.de.gz", "rt", encoding="utf-8") as f:
        tok_refs = f.read().splitlines()
    results = {
        "recipe": args.recipe,
        "machine": {"cpu": platform.processor(), "threads": torch.get_num_threads()},
        "phases": json.loads(args.result.read_text())["phases"] if args.resume else [],
    }
    for i, minutes in enumerate(sorted(args.minutes)):
        recipe = load_recipe(
            args.recipe,
            [
                f"--train.max_minutes={minutes}",
                "--train.max_steps=0",
                f"--train.out_dir={args.out}",
                f"--train.keep_checkpoints={args.average}",
            ],
        )
        train(recipe, resume=args.resume or i > 0, progress=False)
        log = [json.loads(line) for line in (args.out / "metrics.jsonl").read_text().splitlines()]
        speeds = sorted(r["tokens_per_s"] for r in log if "tokens_per_s" in r)
        steps = sorted((args.out / "checkpoints").glob("step_*"))[-args.average :]
        averaged = average_checkpoints(steps, args.out / f"averaged_{int(minutes)}min")
        phase = {
            "minutes": minutes,
            "steps": log[-1]["step"],
            "elapsed_s": round(max(r.get("elapsed", 0) for r in log), 1),
            "median_target_tokens_per_s": round(speeds[len(speeds) // 2], 1) if speeds else None,
            "val_bleu_curve": [(r["step"], round(r["val_bleu"], 2)) for r in log if "val_bleu" in r],
            "best_greedy": evaluate_checkpoint(args.out / "best", test.src, test.tgt, tok_refs, 1),
            "best_beam4": evaluate_checkpoint(args.out / "best", test.src, test.tgt, tok_refs, 4),
            "averaged_beam4": evaluate_checkpoint(averaged, test.src, test.tgt, tok_refs, 4),
        }
        results["phases"] = [p for p in results["phases"] if p["minutes"] != minutes] + [phase]
        print(json.dumps(phase, indent=1, ensure_ascii=False))
        args.result.parent.mkdir(parents=True, exist_ok=True)
        args.result.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.result}")


if __name__ == "__main__":
    main()
