"""Train a Multi30k recipe from scratch and measure BLEU against wall-clock time.

    python benchmarks/multi30k.py --minutes 45 120
    python benchmarks/multi30k.py --minutes 45 && python benchmarks/multi30k.py --minutes 120 --resume
    python benchmarks/multi30k.py --recipe configs/multi30k_de_en.toml --minutes 45   # other directions

Trains until the first budget, evaluates on test_2016_flickr, resumes (exactly: see train/loop.py)
until the next budget, evaluates again. `--resume` continues an earlier invocation's run and adds its
phases to the existing results, so other jobs can use the CPU between phases. Each phase keeps its best
checkpoint and the average of its last checkpoints as `best_<minutes>min` and `averaged_<minutes>min`;
`--reevaluate` scores those again (with today's decoding code) without training.

Each evaluation first chooses the length penalty of beam search on the validation set (the best
checkpoint, beam 4, sacreBLEU; `--length-penalties`), then reports, for the best checkpoint (greedy,
and beam 4 with the recipe's and with the chosen penalty) and for the averaged one (beam 4, chosen):
  * sacreBLEU on detokenised cased text, with its signature;
  * BLEU on lower-cased Moses-tokenised text against ../shared/data/multi30k/tok/ (the number
    Multi30k papers report), hypotheses normalised and tokenised with sacremoses the same way; for a
    target language without tokenised references there (Czech), the raw references are normalised,
    lower-cased and tokenised here in the same way.
It also records the host (CPU model, fp32 and bf16 matmul peaks: updates per minute differ 2x between
hosts) and the validation curve against updates and minutes. Writes benchmarks/results/<recipe>.json.
"""

import argparse
import gzip
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import sacrebleu
import torch
from host import describe, matmul_peak
from sacremoses import MosesPunctNormalizer, MosesTokenizer

from tnmt.checkpoint import average_checkpoints
from tnmt.data.corpus import ParallelCorpus, read_parallel
from tnmt.data.dataset import corpus_files
from tnmt.data.multi30k import find_multi30k
from tnmt.decode.translator import Translator
from tnmt.evaluate import score
from tnmt.recipe import load_recipe
from tnmt.train.loop import train

REPO = Path(__file__).resolve().parent.parent


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


@dataclass(frozen=True)
class Sets:
    """What every phase is scored on: validation (to choose) and test_2016_flickr (to report)."""

    val: ParallelCorpus
    test: ParallelCorpus
    tok_refs: list[str]  # the test references, lower-cased, normalised and tokenised
    lang: str


def evaluate_checkpoint(path: Path, sets: Sets, beam: int, length_penalty: float | None = None) -> dict:
    """Test scores of one checkpoint; `length_penalty` None: the checkpoint's own (its recipe's [decode])."""
    translator = Translator.from_checkpoint(path)
    alpha = translator.decode.length_penalty if length_penalty is None else length_penalty
    start = time.monotonic()
    hypotheses = translator.translate(sets.test.src, beam_size=beam, length_penalty=alpha)
    seconds = time.monotonic() - start
    scores = score(hypotheses, sets.test.tgt)
    tok_bleu = sacrebleu.corpus_bleu(lc_norm_tok(hypotheses, sets.lang), [sets.tok_refs], tokenize="none", force=True)
    return {
        "checkpoint": str(path.resolve().name),
        "beam_size": beam,
        "length_penalty": alpha,
        "sacrebleu": round(scores.bleu, 2),
        "signature": scores.bleu_signature,
        "chrf": round(scores.chrf, 2),
        "tok_lc_bleu": round(tok_bleu.score, 2),
        "decode_seconds": round(seconds, 1),
        "examples": hypotheses[:3],
    }


def choose_length_penalty(path: Path, sets: Sets, candidates: list[float], beam: int) -> dict:
    """Validation sacreBLEU of beam search for each candidate alpha; the best is chosen (ties: the first)."""
    translator = Translator.from_checkpoint(path)
    val_bleu = {}
    for alpha in candidates:
        hypotheses = translator.translate(sets.val.src, beam_size=beam, length_penalty=alpha)
        val_bleu[str(alpha)] = round(score(hypotheses, sets.val.tgt).bleu, 2)
    return {"beam_size": beam, "val_bleu": val_bleu, "chosen": float(max(val_bleu, key=val_bleu.__getitem__))}


def evaluate_phase(best: Path, averaged: Path, sets: Sets, candidates: list[float]) -> dict:
    tuned = choose_length_penalty(best, sets, candidates, beam=4)
    return {
        "length_penalty_on_val": tuned,
        "best_greedy": evaluate_checkpoint(best, sets, 1),
        "best_beam4_recipe_penalty": evaluate_checkpoint(best, sets, 4),
        "best_beam4": evaluate_checkpoint(best, sets, 4, tuned["chosen"]),
        "averaged_beam4": evaluate_checkpoint(averaged, sets, 4, tuned["chosen"]),
    }


def train_phase(args: argparse.Namespace, minutes: float, resume: bool) -> dict:
    """Train until `minutes`, keep the phase's best and averaged checkpoints, and describe the run so far."""
    recipe = load_recipe(
        args.recipe,
        [
            f"--train.max_minutes={minutes}",
            "--train.max_steps=0",
            f"--train.out_dir={args.out}",
            f"--train.keep_checkpoints={args.average}",
        ],
    )
    train(recipe, resume=resume, progress=False)
    log = [json.loads(line) for line in (args.out / "metrics.jsonl").read_text().splitlines()]
    speeds = sorted(r["tokens_per_s"] for r in log if "tokens_per_s" in r)
    steps = sorted((args.out / "checkpoints").glob("step_*"))[-args.average :]
    average_checkpoints(steps, args.out / f"averaged_{int(minutes)}min")
    best = (args.out / "best").resolve()
    shutil.copytree(best, args.out / f"best_{int(minutes)}min", dirs_exist_ok=True)
    return {
        "minutes": minutes,
        "best_checkpoint": best.name,
        "steps": log[-1]["step"],
        "elapsed_s": round(max(r.get("elapsed", 0) for r in log), 1),
        "median_target_tokens_per_s": round(speeds[len(speeds) // 2], 1) if speeds else None,
        "val_curve": [
            {"step": r["step"], "minutes": round(r["elapsed"] / 60, 1), "bleu": round(r["val_bleu"], 2)}
            for r in log
            if "val_bleu" in r
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[45, 120])
    parser.add_argument("--recipe", default=str(REPO / "configs" / "multi30k_en_de.toml"))
    parser.add_argument("--average", type=int, default=5, help="average this many last checkpoints")
    parser.add_argument(
        "--length-penalties", type=float, nargs="+", default=[0.6, 1.0, 1.5, 2.0], help="chosen from on validation"
    )
    parser.add_argument("--out", type=Path, help="run directory (default: outputs/bench_<recipe>)")
    parser.add_argument("--result", type=Path, help="default: benchmarks/results/<recipe>.json")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out, keep earlier phases")
    parser.add_argument(
        "--reevaluate", action="store_true", help="no training: score the --minutes phases' saved checkpoints again"
    )
    args = parser.parse_args()
    name = Path(args.recipe).stem
    args.out = args.out or REPO / "outputs" / f"bench_{name}"
    args.result = args.result or REPO / "benchmarks" / "results" / f"{name}.json"
    root = find_multi30k()
    if root is None:
        raise SystemExit("Multi30k not found: set TNMT_DATA_DIR")
    data = load_recipe(args.recipe).data
    test = read_parallel(*corpus_files(data, "test_2016_flickr"))
    tok_refs, tok_source = tokenized_references(root, test.tgt, data.tgt_lang)
    sets = Sets(read_parallel(*corpus_files(data, "val")), test, tok_refs, data.tgt_lang)
    earlier = json.loads(args.result.read_text()) if args.resume or args.reevaluate else {}
    results = {
        "recipe": args.recipe,
        "direction": f"{data.src_lang}-{data.tgt_lang}",
        "tokenized_references": tok_source,
        "machine": earlier["machine"] if args.reevaluate else describe_machine(load_recipe(args.recipe).train.threads),
        "phases": earlier.get("phases", []),
    }
    for i, minutes in enumerate(sorted(args.minutes)):
        if args.reevaluate:
            (phase,) = [p for p in results["phases"] if p["minutes"] == minutes]
        else:
            phase = train_phase(args, minutes, resume=args.resume or i > 0)
        tag = f"{int(minutes)}min"
        phase |= evaluate_phase(args.out / f"best_{tag}", args.out / f"averaged_{tag}", sets, args.length_penalties)
        results["phases"] = sorted(
            [p for p in results["phases"] if p["minutes"] != minutes] + [phase], key=lambda p: p["minutes"]
        )
        print(json.dumps(phase, indent=1, ensure_ascii=False))
        args.result.parent.mkdir(parents=True, exist_ok=True)
        args.result.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.result}")


def describe_machine(threads: int) -> dict:
    """The host, its threads and its matmul peaks, measured now (before training shares the cores)."""
    threads = threads or torch.get_num_threads()
    peaks = {
        kind: round(matmul_peak(dtype, threads), 1)
        for kind, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    return {**describe(), "threads": threads, "matmul_peak_gflops": peaks}


if __name__ == "__main__":
    main()
