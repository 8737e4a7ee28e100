"""Train a Multi30k recipe from scratch and measure BLEU against wall-clock time.

    python -m benchmarks.quality.multi30k --minutes 45 120
    python -m benchmarks.quality.multi30k --minutes 45 && python -m benchmarks.quality.multi30k --minutes 120 --resume
    python -m benchmarks.quality.multi30k --recipe configs/multi30k_de_en.toml --minutes 45   # other directions
    python -m benchmarks.quality.multi30k --minutes 45 --set data.term_annotations=0.3 --out outputs/terms45

Trains until the first budget, evaluates on test_2016_flickr, resumes (exactly: see train/loop.py)
until the next budget, evaluates again. `--resume` continues an earlier invocation's run and adds its
phases to the existing results, so other jobs can use the CPU between phases. Each evaluation reports,
for the best checkpoint (greedy and beam 4) and for the average of the last checkpoints (beam 4):
  * sacreBLEU on detokenised cased text, with its signature;
  * BLEU on lower-cased Moses-tokenised text against ../shared/data/multi30k/tok/ (the number
    Multi30k papers report), hypotheses normalised and tokenised with sacremoses the same way; for a
    target language without tokenised references there (Czech), the raw references are normalised,
    lower-cased and tokenised here in the same way.
It also records the host (CPU model, fp32 and bf16 matmul peaks: updates per minute differ 2x between
hosts; each phase keeps the peaks of the invocation that trained it, since a resumed run may be measured on
another day or host) and the validation curve against updates and minutes. Writes
benchmarks/results/<recipe>.json.
"""

import argparse
import gzip
import json
import time
from dataclasses import replace
from pathlib import Path

import sacrebleu
import torch
from sacremoses import MosesPunctNormalizer, MosesTokenizer

from benchmarks.common.host import describe, matmul_peak
from tnmt.checkpoint import average_checkpoints
from tnmt.config import DataConfig
from tnmt.data.corpus import ParallelCorpus, read_parallel
from tnmt.data.dataset import corpus_files
from tnmt.data.multi30k import find_multi30k
from tnmt.data.multiway import direction_data
from tnmt.evaluate import score
from tnmt.recipe import load_recipe
from tnmt.train.loop import train
from tnmt.translate.translator import Translator

REPO = Path(__file__).resolve().parents[2]


def lc_norm_tok(lines: list[str], lang: str) -> list[str]:
    """The `lc.norm.tok` form: Moses punctuation normalisation, lower-casing, Moses tokenisation."""
    normalizer, tokenizer = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    return [tokenizer.tokenize(normalizer.normalize(line).lower(), return_str=True, escape=True) for line in lines]


def tokenized_references(root: Path, refs: list[str], lang: str) -> tuple[list[str], str]:
    """The Multi30k release's tokenised test references, or `refs` tokenised here when it has none."""
    path = root / "tok" / f"test_2016_flickr.lc.norm.tok.{lang}.gz"
    if not path.exists():
        return lc_norm_tok(refs, lang), "raw references tokenised here (sacremoses)"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines(), str(path.relative_to(root))


def test_set(data: DataConfig, root: Path) -> tuple[tuple[str, str], ParallelCorpus, list[str], str]:
    """The recipe's direction (of a multilingual recipe, the first listed: bidirectional training's), its
    test_2016_flickr pairs, their tokenised references and where those came from."""
    pair = data.trained_directions[0]
    test = read_parallel(*corpus_files(direction_data(data, pair) if data.multilingual else data, "test_2016_flickr"))
    return pair, test, *tokenized_references(root, test.tgt, pair[1])


def evaluate_checkpoint(
    path: Path, test_src: list[str], refs: list[str], tok_refs: list[str], beam: int, pair: tuple[str, str]
) -> dict:
    """The checkpoint's translations of the test set in direction `pair` (of a multilingual model: that one),
    scored."""
    lang = pair[1]
    translator = Translator.from_checkpoint(path).for_pair(*pair)
    start = time.monotonic()
    hypotheses = translator.translate(test_src, replace(translator.decode, beam_size=beam))
    seconds = time.monotonic() - start
    scores = score(hypotheses, refs)
    return {
        "checkpoint": str(path.resolve().name),
        "beam_size": beam,
        "sacrebleu": round(scores.bleu, 2),
        "signature": scores.bleu_signature,
        "chrf": round(scores.chrf, 2),
        "tok_lc_bleu": round(
            sacrebleu.corpus_bleu(lc_norm_tok(hypotheses, lang), [tok_refs], tokenize="none", force=True).score, 2
        ),
        "decode_seconds": round(seconds, 1),
        "examples": hypotheses[:3],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[45, 120])
    parser.add_argument("--recipe", default=str(REPO / "configs" / "multi30k_en_de.toml"))
    parser.add_argument("--average", type=int, default=5, help="average this many last checkpoints")
    parser.add_argument("--out", type=Path, help="run directory (default: outputs/bench_<recipe>)")
    parser.add_argument("--result", type=Path, help="default: benchmarks/results/<recipe>.json")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out, keep earlier phases")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a recipe override (data.term_annotations=0.3)"
    )
    args = parser.parse_args()
    name = Path(args.recipe).stem
    args.out = args.out or REPO / "outputs" / f"bench_{name}"
    args.result = args.result or REPO / "benchmarks" / "results" / f"{name}.json"
    root = find_multi30k()
    if root is None:
        raise SystemExit("Multi30k not found: set TNMT_DATA_DIR")
    overrides = [f"--{item}" for item in args.set]
    shipped = load_recipe(args.recipe, overrides)
    pair, test, tok_refs, tok_source = test_set(shipped.data, root)
    lang = pair[1]
    threads = shipped.train.threads or torch.get_num_threads()
    peaks = {
        kind: round(matmul_peak(dtype, threads), 1)
        for kind, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    results = {
        "recipe": args.recipe,
        "overrides": args.set,
        "direction": f"{pair[0]}-{lang}",
        "tokenized_references": tok_source,
        "machine": {**describe(), "threads": threads, "matmul_peak_gflops": peaks},
        "phases": json.loads(args.result.read_text())["phases"] if args.resume else [],
    }
    for i, minutes in enumerate(sorted(args.minutes)):
        recipe = load_recipe(
            args.recipe,
            [
                *overrides,
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
            "matmul_peak_gflops": peaks,
            "val_curve": [
                {"step": r["step"], "minutes": round(r["elapsed"] / 60, 1), "bleu": round(r["val_bleu"], 2)}
                for r in log
                if "val_bleu" in r
            ],
            "best_greedy": evaluate_checkpoint(args.out / "best", test.src, test.tgt, tok_refs, 1, pair),
            "best_beam4": evaluate_checkpoint(args.out / "best", test.src, test.tgt, tok_refs, 4, pair),
            "averaged_beam4": evaluate_checkpoint(averaged, test.src, test.tgt, tok_refs, 4, pair),
        }
        results["phases"] = [p for p in results["phases"] if p["minutes"] != minutes] + [phase]
        print(json.dumps(phase, indent=1, ensure_ascii=False))
        args.result.parent.mkdir(parents=True, exist_ok=True)
        args.result.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.result}")


if __name__ == "__main__":
    main()
