"""Glossary terms that replace the model's word (issue 64): a synonym glossary on held-out captions.

    python -m benchmarks.quality.synonyms --checkpoint outputs/base45/best [--baseline ../wt-main] [--threads 2]

`synonyms_en_de.tsv` (beside this file, written for it) maps common English words of the captions to the German
words a translator usually writes for them and to a valid synonym that a Multi30k model rarely writes. Each of
`--sentences` captions of test_2016_flickr, then val (`TNMT_DATA_DIR` or ../shared/data/multi30k beside the
repository), that holds one of those words gets a one-entry glossary: word -> synonym. At most `--per-word`
captions per word, so that no word dominates. Translated with the checkpoint's settings, plain and steered, it
reports:

- term used: the steered output writes the synonym (target >= 99%);
- doubled: it also writes one of the usual words (target <= 2%: the term joined the model's word instead of
  replacing it);
- shorter: its words are fewer than 0.8x the plain output's (target <= 1%: a phrase dropped to make room);
- chrF of the steered outputs against the plain outputs with the synonym swapped in for the usual word
  (target >= 95: the term changes its word and nothing else);
- speed: seconds for all sentences, plain and steered, the median of `--repeats` runs, and their ratio
  (`steered_over_plain`: what a glossary costs; target <= 2.0);
- reported: the share of steered answers whose `constraints` report a term doubled or words lost (a checkout
  before issue 64 reports neither).

`--baseline DIR` runs the same in the tnmt of another checkout (DIR/src: a worktree of main before the issue), in
a child process, and reports it beside, with the share of steered outputs that are the same in both. Writes
benchmarks/results/synonyms.json (with the host).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sacrebleu

from benchmarks.common.host import describe

HERE = Path(__file__).resolve().parent
DICTIONARY = HERE / "synonyms_en_de.tsv"
SHORTER = 0.8  # a steered output with fewer words than this share of the plain one's counts as shorter


def dictionary(path: Path = DICTIONARY) -> list[tuple[str, tuple[str, ...], str]]:
    """(English word, its usual German words, the synonym) per line of the TSV (comments and blanks skipped)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            word, usual, synonym = line.split("\t")
            rows.append((word, tuple(u.strip() for u in usual.split("|")), synonym.strip()))
    return rows


def glossary_set(sources: list[str], n: int, per_word: int) -> list[tuple[str, int]]:
    """(caption, dictionary row) for up to `n` captions holding a dictionary word (the first one found, case
    ignored, whole words), at most `per_word` per word, in corpus order."""
    rows = dictionary()
    taken = [0] * len(rows)
    chosen = []
    for text in sources:
        words = {w.casefold() for w in re.findall(r"[\w'-]+", text)}
        for r, (word, _, _) in enumerate(rows):
            if word in words and taken[r] < per_word:
                chosen.append((text, r))
                taken[r] += 1
                break
        if len(chosen) == n:
            break
    return chosen


def words_of(text: str) -> list[str]:
    return [w.strip(".,;:!?\"'()").casefold() for w in text.split()]


def swapped(plain: str, usual: tuple[str, ...], synonym: str) -> str:
    """The plain output with its first usual word replaced by the synonym (unchanged when it has none)."""
    folded = {u.casefold() for u in usual}
    out = plain.split()
    for j, word in enumerate(out):
        bare = word.strip(".,;:!?\"'()")
        if bare.casefold() in folded:
            out[j] = word.replace(bare, synonym)
            break
    return " ".join(out)


def child(checkpoint: str, texts_path: Path, out: Path, repeats: int, threads: int) -> None:
    """Translate the set plain and steered with the tnmt importable here, timing each; write the outputs."""
    import torch

    from tnmt.translate.glossary import glossary_entry
    from tnmt.translate.steering import Steering
    from tnmt.translate.translator import Translator

    torch.set_num_threads(threads)
    data = json.loads(texts_path.read_text())
    texts = [t for t, _, _ in data]
    steering = [Steering(glossary=(glossary_entry(w, s, where="bench"),)) for _, w, s in data]
    translator = Translator.from_checkpoint(checkpoint)
    translator.translate(texts[:8])  # warm-up
    result = {}
    for name, kwargs in (("plain", {}), ("steered", {"steering": steering})):
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            found = translator.translations(texts, **kwargs)
            seconds.append(time.perf_counter() - start)
        reports = [
            [getattr(c, "doubled", None) is True or bool(getattr(c, "lost", ())) for c in t.constraints] for t in found
        ]
        result[name] = {"outputs": [t.text for t in found], "seconds": seconds, "reports": reports}
    result["tnmt"] = str(Path(sys.modules["tnmt"].__file__).parent)  # which checkout ran
    out.write_text(json.dumps(result, ensure_ascii=False))


def measure(chosen, rows, found: dict) -> dict:
    plain, steered = found["plain"]["outputs"], found["steered"]["outputs"]
    n = len(chosen)
    used = doubled = shorter = flagged = 0
    examples = []
    references = []
    reports = found["steered"]["reports"]
    for (text, r), p, s, report in zip(chosen, plain, steered, reports, strict=True):
        _, usual, synonym = rows[r]
        ws = words_of(s)
        is_used = synonym.casefold() in ws
        is_doubled = any(u.casefold() in ws for u in usual)
        is_shorter = len(s.split()) < SHORTER * len(p.split())
        used, doubled, shorter = used + is_used, doubled + is_doubled, shorter + is_shorter
        flagged += any(report)
        references.append(swapped(p, usual, synonym))
        if (is_doubled or is_shorter or not is_used) and len(examples) < 12:
            examples.append({"source": text, "plain": p, "steered": s})
    return {
        "tnmt": found["tnmt"],
        "sentences": n,
        "term_used_pct": round(100 * used / n, 1),
        "doubled_pct": round(100 * doubled / n, 1),
        "shorter_pct": round(100 * shorter / n, 1),
        "reported_doubled_or_lost_pct": round(100 * flagged / n, 1),  # what the answers' `constraints` say
        "chrf_vs_plain_swapped": round(sacrebleu.corpus_chrf(steered, [references]).score, 2),
        "seconds_plain_median": round(statistics.median(found["plain"]["seconds"]), 3),
        "seconds_steered_median": round(statistics.median(found["steered"]["seconds"]), 3),
        "steered_over_plain": round(
            statistics.median(found["steered"]["seconds"]) / statistics.median(found["plain"]["seconds"]), 2
        ),
        "seconds_plain_runs": [round(x, 3) for x in found["plain"]["seconds"]],
        "seconds_steered_runs": [round(x, 3) for x in found["steered"]["seconds"]],
        "failures": examples,
    }


def run_child(src: Path, args, texts_path: Path, work: Path, name: str) -> dict:
    out = work / f"{name}.json"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{Path(__file__).resolve().parents[2]}"}
    command = [sys.executable, "-m", "benchmarks.quality.synonyms", "--child", str(texts_path), "--child-out", str(out)]
    command += ["--checkpoint", args.checkpoint, "--repeats", str(args.repeats), "--threads", str(args.threads)]
    subprocess.run(command, env=env, check=True)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--baseline", type=Path, help="a checkout whose src/ holds the tnmt to compare with")
    parser.add_argument("--sentences", type=int, default=150)
    parser.add_argument("--per-word", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE.parent / "results" / "synonyms.json")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.checkpoint, args.child, args.child_out, args.repeats, args.threads)
        return
    from benchmarks.quality.markup import data_dir, read  # here: a child runs another checkout's tnmt

    root = data_dir()
    sources = read(root / "test_2016_flickr.en.gz") + read(root / "val.en.gz")
    rows = dictionary()
    chosen = glossary_set(sources, args.sentences, args.per_word)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        texts_path = work / "texts.json"
        texts_path.write_text(json.dumps([(t, rows[r][0], rows[r][2]) for t, r in chosen], ensure_ascii=False))
        systems = {"tnmt": Path(__file__).resolve().parents[2] / "src"}
        if args.baseline:
            systems["baseline"] = args.baseline.resolve() / "src"
        found = {name: run_child(src, args, texts_path, work, name) for name, src in systems.items()}
        results = {name: measure(chosen, rows, one) for name, one in found.items()}
    words = sorted({rows[r][0] for _, r in chosen})
    report = {
        "checkpoint": args.checkpoint,
        "baseline": str(args.baseline) if args.baseline else None,
        "machine": {**describe(), "threads": args.threads},
        "dictionary_words": words,
        "results": results,
    }
    if args.baseline:
        report["steered_speed_vs_baseline"] = round(
            results["baseline"]["seconds_steered_median"] / results["tnmt"]["seconds_steered_median"], 2
        )
        ours, theirs = found["tnmt"]["steered"]["outputs"], found["baseline"]["steered"]["outputs"]
        report["steered_outputs_as_baseline_pct"] = round(
            100 * sum(a == b for a, b in zip(ours, theirs, strict=True)) / len(ours), 1
        )
        report["steered_outputs_changed"] = [
            {"source": text, "baseline": b, "tnmt": a}
            for (text, _), a, b in zip(chosen, ours, theirs, strict=True)
            if a != b
        ][:20]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({k: {m: v for m, v in r.items() if m != "failures"} for k, r in results.items()}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
