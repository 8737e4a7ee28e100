"""One multilingual model on Multi30k's twelve directions, against the one-pair recipes and against pivoting.

    tnmt train configs/multi30k_multi.toml                        # 2 hours: outputs/multi30k_multi
    python -m benchmarks.quality.multilingual --run outputs/multi30k_multi
    python -m benchmarks.quality.multilingual --run outputs/multi30k_multi --no-table --equal-updates  # 4 one-pair runs
    python -m benchmarks.quality.multilingual --run outputs/multi30k_multi --no-table --vocab-sizes 8000,12000,16000
    tnmt train configs/multi30k_multi_zero_shot.toml              # en<->cs held out
    python -m benchmarks.quality.multilingual --run outputs/multi30k_multi --no-table \\
        --zero-shot-run outputs/multi30k_multi_zero_shot

What it measures, on test_2016_flickr with beam 4 (JSON in benchmarks/results/multilingual.json):
  * the table: every direction of the run's best checkpoint and of the average of its last checkpoints, with
    sacreBLEU, chrF and tok-lc BLEU (lower-cased Moses-tokenised, as benchmarks/quality/multi30k.py scores:
    the release's tokenised references, or Czech's raw references tokenised the same way), and the off-target
    rate: the share of translations the server's language detector (serve/libretranslate/detect.py) calls a
    language other than the target;
  * the one-pair recipes' figures from their own results (benchmarks/results/multi30k_*.json: en->de,
    de->en, en->fr, en->cs at 45 minutes, en->de at 2 hours too), and with `--equal-updates` each of those
    recipes trained here for the multilingual run's updates divided by its number of directions (the same
    updates per direction: an update of the one model is a batch of mixed directions);
  * with `--vocab-sizes`, the joint vocabulary's size chosen on validation: the recipe trained briefly with each;
  * with `--zero-shot-run` (the recipe without en<->cs): en->cs and cs->en translated zero-shot against
    pivoting through German (en->de->cs, cs->de->en: English is one end of the held-out pair, so the pivot
    is the other language every direction of it was trained with), BLEU and off-target rate each.
Each part records its command and host: parts may be measured apart, `--no-table` keeping the table `--out` holds.
`--equal-updates` runs train on this host, whatever trained `--run`.
"""

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.common.host import describe, matmul_peak
from benchmarks.quality.multi30k import lc_norm_tok
from tnmt.checkpoint import average_checkpoints
from tnmt.data.corpus import read_lines
from tnmt.data.multi30k import find_multi30k, multi30k_paths
from tnmt.directions import direction_name
from tnmt.evaluate import score
from tnmt.recipe import load_recipe
from tnmt.serve.libretranslate.detect import Detector
from tnmt.train.loop import train
from tnmt.translate.translator import Translator

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
ONE_PAIR = {"en-de": "multi30k_en_de", "de-en": "multi30k_de_en", "en-fr": "multi30k_en_fr", "en-cs": "multi30k_en_cs"}
SPLIT = "test_2016_flickr"


def test_set(root: Path, source: str, target: str) -> tuple[list[str], list[str], list[str]]:
    """Sources, references and tok-lc references of one direction."""
    src, ref = (read_lines(path) for path in multi30k_paths(root, SPLIT, source, target))
    tok = root / "tok" / f"{SPLIT}.lc.norm.tok.{target}.gz"
    return src, ref, read_lines(tok) if tok.exists() else lc_norm_tok(ref, target)


def scored(hypotheses: list[str], refs: list[str], tok_refs: list[str], target: str, detector: Detector) -> dict:
    import sacrebleu

    scores = score(hypotheses, refs)
    off = sum(1 for h in hypotheses if h.strip() and detector.detect(h)[0][0] != target)
    return {
        "sacrebleu": round(scores.bleu, 2),
        "chrf": round(scores.chrf, 2),
        "tok_lc_bleu": round(
            sacrebleu.corpus_bleu(lc_norm_tok(hypotheses, target), [tok_refs], tokenize="none", force=True).score, 2
        ),
        "off_target_pct": round(100 * off / len(hypotheses), 1),
    }


def table(checkpoint: Path, root: Path, detector: Detector, beam: int) -> list[dict]:
    """Every trained direction of `checkpoint`, translated and scored."""
    base = Translator.from_checkpoint(checkpoint)
    rows = []
    for source, target in base.directions:
        src, ref, tok = test_set(root, source, target)
        translator = base.for_pair(source, target)
        started = time.monotonic()
        hypotheses = translator.translate(src, replace(translator.decode, beam_size=beam))
        seconds = time.monotonic() - started
        row = {"direction": direction_name((source, target)), **scored(hypotheses, ref, tok, target, detector)}
        rows.append(row | {"decode_seconds": round(seconds, 1), "example": hypotheses[0]})
        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    return rows


def one_pair_results() -> dict[str, list[dict]]:
    """The one-pair recipes' own figures: per direction, each phase of its results file (minutes, updates, host)."""
    found = {}
    for direction, name in ONE_PAIR.items():
        for suffix in ("_guided", ""):
            path = RESULTS / f"{name}{suffix}.json"
            if path.exists():
                results = json.loads(path.read_text())
                found[direction] = [
                    {
                        "file": path.name,
                        "minutes": p["minutes"],
                        "updates": p["steps"],
                        "tok_lc_bleu_best_beam4": p["best_beam4"]["tok_lc_bleu"],
                        "tok_lc_bleu_averaged_beam4": p["averaged_beam4"]["tok_lc_bleu"],
                        "sacrebleu_best_beam4": p["best_beam4"]["sacrebleu"],
                        "host": results.get("machine", {}).get("cpu", ""),
                    }
                    for p in results["phases"]
                ]
                break
    return found


def equal_updates(updates: int, root: Path, detector: Detector, work: Path) -> dict[str, dict]:
    """Each one-pair recipe trained for `updates` updates here, its best checkpoint scored with beam 4."""
    found = {}
    for direction, name in ONE_PAIR.items():
        out = work / f"equal_updates_{name}"
        recipe = load_recipe(
            str(REPO / "configs" / f"{name}.toml"),
            [f"--train.out_dir={out}", f"--train.max_steps={updates}", "--train.max_minutes=0"],
        )
        started = time.monotonic()
        train(recipe, resume=(out / "last").exists(), progress=False)
        source, target = direction.split("-")
        src, ref, tok = test_set(root, source, target)
        translator = Translator.from_checkpoint(out / "best")
        hypotheses = translator.translate(src, replace(translator.decode, beam_size=4))
        found[direction] = {"updates": updates, "train_seconds": round(time.monotonic() - started, 1)}
        found[direction] |= scored(hypotheses, ref, tok, target, detector)
        print(direction, json.dumps(found[direction]), flush=True)
    return found


def vocabularies(sizes: list[int], updates: int, work: Path) -> list[dict]:
    """The multilingual recipe trained for `updates` updates with each joint vocabulary size, here, one after
    the other: validation BLEU and chrF (detokenised text, so comparable across vocabularies) at the last update.
    The recipe keeps its guided alignment: without it, the twelve-direction model still ignores its source after
    1,500 updates (one German sentence for every input, val BLEU 1.6 against 18.4 with it)."""
    rows = []
    for size in sizes:
        out = work / f"vocabulary_{size}"
        overrides = [f"--data.vocab_size={size}", f"--train.max_steps={updates}", "--train.max_minutes=0"]
        overrides.append(f"--train.out_dir={out}")
        started = time.monotonic()
        train(load_recipe(str(REPO / "configs" / "multi30k_multi.toml"), overrides), progress=False)
        last = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if "val_bleu" in line]
        rows.append(
            {
                "vocab_size": size,
                "updates": last[-1]["step"],
                "val_bleu": round(last[-1]["val_bleu"], 2),
                "val_chrf": round(last[-1]["val_chrf"], 2),
                "train_seconds": round(time.monotonic() - started, 1),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def zero_shot(checkpoint: Path, root: Path, detector: Detector, beam: int) -> dict[str, dict]:
    """en->cs and cs->en of the held-out run: zero-shot, and pivoting through German."""
    base = Translator.from_checkpoint(checkpoint)
    found = {}
    for source, target in (("en", "cs"), ("cs", "en")):
        src, ref, tok = test_set(root, source, target)
        direct = base.for_pair(source, target, zero_shot=True)
        settings = replace(base.decode, beam_size=beam)
        german = base.for_pair(source, "de").translate(src, settings)
        pivoted = base.for_pair("de", target).translate(german, settings)
        found[direction_name((source, target))] = {
            "zero_shot": scored(direct.translate(src, settings), ref, tok, target, detector),
            "pivot_through_de": scored(pivoted, ref, tok, target, detector),
        }
        print(source, target, json.dumps(found[direction_name((source, target))]), flush=True)
    return found


def run_summary(run: Path) -> dict:
    """What the run trained: its recipe, updates, training seconds and validation curve."""
    log = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    recipe = json.loads((run / "recipe.json").read_text())
    return {
        "directory": str(run),
        "recipe": recipe,
        "updates": log[-1]["step"],
        "elapsed_s": round(max(r.get("elapsed", 0) for r in log), 1),
        "val_curve": [
            {"step": r["step"], "minutes": round(r["elapsed"] / 60, 1), "bleu": round(r["val_bleu"], 2)}
            for r in log
            if "val_bleu" in r
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a multilingual run's directory (tnmt train ...)")
    parser.add_argument("--zero-shot-run", type=Path, help="the run of the recipe without en<->cs")
    parser.add_argument("--equal-updates", action="store_true", help="train the one-pair recipes for as many updates")
    parser.add_argument("--vocab-sizes", help="e.g. 8000,12000,16000: short runs of the recipe, one per size")
    parser.add_argument("--vocab-updates", type=int, default=1500, help="updates of each --vocab-sizes run")
    parser.add_argument("--no-table", action="store_true", help="keep the table --out already holds (other parts only)")
    parser.add_argument("--average", type=int, default=5, help="average this many last checkpoints (0: best only)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS / "multilingual.json")
    args = parser.parse_args()
    root = find_multi30k(langs=("en", "de", "fr", "cs"))  # tok-lc references: test_set reads what there is
    if root is None:
        raise SystemExit("Multi30k (all four languages) not found: set TNMT_DATA_DIR")
    detector = Detector(["en", "de", "fr", "cs"])
    threads = torch.get_num_threads()
    peaks = {
        kind: round(matmul_peak(dtype, threads), 1)
        for kind, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    # each part records the command and machine that measured it: parts may come from several invocations
    measured = {
        "command": " ".join(["python -m benchmarks.quality.multilingual", *sys.argv[1:]]),
        "machine": {**describe(), "threads": threads, "matmul_peak_gflops": peaks},
    }
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results |= {"run": run_summary(args.run), "one_pair_recipes": one_pair_results()}
    if not args.no_table:
        results["table"] = measured | {"best": table(args.run / "best", root, detector, args.beam)}
        if args.average:
            steps = sorted((args.run / "checkpoints").glob("step_*"))[-args.average :]
            averaged = average_checkpoints(steps, args.run / "averaged")
            results["table"]["averaged"] = table(averaged, root, detector, args.beam)
    if args.equal_updates:
        per_direction = results["run"]["updates"] // len(Translator.from_checkpoint(args.run / "best").directions)
        results["equal_updates"] = measured | equal_updates(per_direction, root, detector, args.run.parent)
    if args.zero_shot_run:
        results["zero_shot"] = measured | {"run": run_summary(args.zero_shot_run)}
        results["zero_shot"] |= zero_shot(args.zero_shot_run / "best", root, detector, args.beam)
    if args.vocab_sizes:
        sizes = [int(size) for size in args.vocab_sizes.split(",")]
        results["vocabulary"] = measured | {"runs": vocabularies(sizes, args.vocab_updates, args.run.parent)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
