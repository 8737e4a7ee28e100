"""The evidence of translations measured on Multi30k: word alignment against a silver reference, confidence
against sentence chrF, and how often warnings fire on clean and on broken outputs.

    python -m benchmarks.quality.evidence --checkpoint RUN/best [--checkpoint GUIDED/best] [--undertrained STEP_CKPT]

- Alignment. The silver reference is eflomal's alignment of the references, symmetrised with
  grow-diag-final-and (tnmt.data.alignment): the training pairs, validation and test_2016_flickr aligned in
  one run (eflomal learns from the whole text), lowercased whitespace words. It is a statistical aligner's
  output, not a human annotation: an alignment error rate against it says how far attention is from
  eflomal, not from the truth. Each checkpoint force-decodes the references; every variant (decoder layer
  from the top, the heads' mean or one head, shifted or not) gives word links, whose AER (Och and Ney
  2003, with every silver link sure) is measured on validation; the best variant on validation is then
  measured once on test.
- Confidence. The checkpoint translates validation and test with its own [decode] settings; the Spearman
  correlation of each candidate sentence confidence with the sentence's chrF against its reference.
  Writes a scatter plot of the chosen one.
- Warnings. False alarms: the share of the validation and test references flagged, per code, when the
  model is forced to write them (clean translations, so every flag is wrong). Then the share of the
  model's own validation and test translations flagged, with the mean chrF of those flagged and of the
  others (a flag should point at a worse output). Then the share flagged on a stress set: the German,
  French and Czech test sources given to the English model;
  random noise; lines of eight test sentences run together; and, with --undertrained, the test outputs of
  an early checkpoint.
- Cost. Translating test sentences with and without evidence (one more teacher-forced pass per batch); alone
  with `--cost-only`.

Multi30k comes from TNMT_DATA_DIR, else ../shared/data/multi30k. Results: benchmarks/results/evidence.json.
"""

import argparse
import json
import random
import statistics
import string
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import sacrebleu
import torch

from benchmarks.common.host import describe
from benchmarks.speed.decode import data_dir, read_gz
from tnmt.aligning_head import alignment_layer_index, alignment_rows
from tnmt.config import DecodeConfig
from tnmt.data.alignment import align_words
from tnmt.data.prepared import PreparedPairs
from tnmt.model import AttentionMaps
from tnmt.translate.evidence import (
    WARNINGS,
    Sentence,
    gather_evidence,
    length_ratio_bounds,
    piece_words,
    word_alignment,
)
from tnmt.translate.translation import Translation
from tnmt.translate.translator import Translator

RESULTS = Path(__file__).resolve().parents[1] / "results"
BATCH = 64
Links = set[tuple[int, int]]


def silver_links(
    data: Path, pairs: dict[str, tuple[list[str], list[str]]], *, train_pairs: int | None
) -> dict[str, list[Links]]:
    """eflomal's symmetrised links of each split's (source, reference) pairs, aligned with the training pairs."""
    sources, targets = read_gz(data / "train.en.gz")[:train_pairs], read_gz(data / "train.de.gz")[:train_pairs]
    spans = {}
    for name, (src, ref) in pairs.items():
        spans[name] = (len(sources), len(sources) + len(src))
        sources += src
        targets += ref
    words = [[" ".join(text.lower().split()) for text in side] for side in (sources, targets)]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as workdir:
        links = list(align_words(*words, workdir=Path(workdir)))
    print(f"eflomal aligned {len(sources)} pairs in {time.monotonic() - started:.0f} s")
    return {name: links[start:end] for name, (start, end) in spans.items()}


def aer(predicted: Sequence[Links], silver: Sequence[Links]) -> float:
    """Alignment error rate with every silver link sure: 1 - 2 |A & S| / (|A| + |S|), over the whole set."""
    both = sum(len(a & s) for a, s in zip(predicted, silver, strict=True))
    total = sum(len(a) + len(s) for a, s in zip(predicted, silver, strict=True))
    return 1 - 2 * both / total


def variants(model_config) -> list[DecodeConfig]:
    """Every layer with the heads' mean and each head, shifted and not."""
    return [
        DecodeConfig(alignment_layer=layer, alignment_head=head, alignment_shift=shift)
        for layer in range(1, model_config.n_decoder_layers + 1)
        for head in range(0, model_config.n_heads + 1)
        for shift in (True, False)
    ]


def name(settings: DecodeConfig) -> str:
    head = "mean" if settings.alignment_head == 0 else f"head {settings.alignment_head}"
    shift = "shifted" if settings.alignment_shift else "unshifted"
    return f"layer {settings.alignment_layer}, {head}, {shift}"


def one_way(rows: torch.Tensor, source_words: list[int], target_words: list[int], *, shift: bool) -> list:
    """The read before issue 51, for comparison: each target subword linked to its strongest source subword
    (none where that is EOS), words linked where any of their subwords are; one direction only."""
    attention = rows[1 : 1 + len(target_words)] if shift else rows[: len(target_words)]
    strongest = attention[:, : len(source_words) + 1].argmax(dim=1).tolist()
    return sorted({(source_words[s], target_words[t]) for t, s in enumerate(strongest) if s != len(source_words)})


READS = {"both ways, symmetrised (translate/evidence.py)": word_alignment, "one way, subword argmax (before)": one_way}


@torch.inference_mode()
def forced_pass(
    translator: Translator, sources: list[str], tgt_ids: list[list[int]]
) -> tuple[list[list[int]], torch.Tensor, AttentionMaps]:
    """Source ids, logits (B, T, V) and attention maps of the references' ids (each at most max_len - 1)
    force-decoded through the model, each decoder starting from the translator's start token (BOS, or the
    target language's tag)."""
    model, tokenizer = translator.model, translator.tokenizer
    limit, pad = model.config.max_len - 1, model.config.pad_id
    src_ids = [tokenizer.encode_source(text)[:limit] for text in sources]
    width_s, width_t = max(map(len, src_ids)) + 1, max(map(len, tgt_ids)) + 1
    src = torch.tensor([[*ids, tokenizer.eos_id] + [pad] * (width_s - 1 - len(ids)) for ids in src_ids])
    tgt = torch.tensor([[translator.start_id, *ids] + [pad] * (width_t - 1 - len(ids)) for ids in tgt_ids])
    logits, maps = model.attention_maps(src, tgt)
    return src_ids, logits, maps


@torch.inference_mode()
def forced_alignments(
    translator: Translator, sources: list[str], references: list[str], settings: list[DecodeConfig], read=word_alignment
) -> list[list[Links]]:
    """Per variant, the word links of each (source, reference) pair force-decoded through the model."""
    tokenizer, limit = translator.tokenizer, translator.model.config.max_len - 1
    found: list[list[Links]] = [[] for _ in settings]
    for start in range(0, len(sources), BATCH):
        src_texts, tgt_texts = sources[start : start + BATCH], references[start : start + BATCH]
        tgt_ids = [tokenizer.encode_target(text)[:limit] for text in tgt_texts]
        src_ids, _, maps = forced_pass(translator, src_texts, tgt_ids)
        words = [
            (
                piece_words(tokenizer.source_pieces(s), s)[: len(si)],
                piece_words(tokenizer.target_pieces(ti), tokenizer.decode_target(ti)),
            )
            for s, si, ti in zip(src_texts, src_ids, tgt_ids, strict=True)
        ]
        for k, variant in enumerate(settings):
            layer = maps.cross[alignment_layer_index(variant.alignment_layer, len(maps.cross))]  # (B, H, T, S)
            rows = alignment_rows(layer, variant.alignment_head).float()  # (B, T, S)
            for b, (source_words, target_words) in enumerate(words):
                found[k].append(set(read(rows[b], source_words, target_words, shift=variant.alignment_shift)))
    return found


def measure_alignment(translator: Translator, splits: dict, silver: dict) -> dict:
    options = variants(translator.model.config)
    on_val = forced_alignments(translator, *splits["val"], options)
    table = sorted(
        (
            {"variant": name(v), "val_aer": round(aer(links, silver["val"]), 4)}
            for v, links in zip(options, on_val, strict=True)
        ),
        key=lambda row: row["val_aer"],
    )
    best = options[[name(v) for v in options].index(table[0]["variant"])]
    stored = translator.decode
    chosen = {"best on validation": best, "the checkpoint's settings": stored}
    test = {}
    for label, variant in chosen.items():
        test[label] = {"variant": name(variant)}
        for read_name, read in READS.items():
            for split in ("val", "test"):
                [links] = forced_alignments(translator, *splits[split], [variant], read)
                test[label][f"{split}_aer, {read_name}"] = round(aer(links, silver[split]), 4)
    return {"validation": table, "test": test, "best": best}


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (ties get their average rank)."""
    return float(np.corrcoef(_ranks(np.asarray(x)), _ranks(np.asarray(y)))[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    order = values.argsort(kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def confidences(translation: Translation) -> dict[str, float]:
    """The candidate sentence confidences of one translation."""
    evidence, n = translation.evidence, len(translation.tokens) + 1
    words = evidence.word_probs or [1.0]
    return {
        "geometric mean of token probabilities (the API's)": evidence.confidence,
        "sentence probability": float(np.exp(translation.log_prob)),
        "length-penalised score (beam search's)": translation.score,
        "mean log-probability per word": float(np.mean(np.log(np.maximum(words, 1e-12)))),
        "lowest word probability": min(words),
        "mean token log-probability (n + 1 tokens)": translation.log_prob / n,
    }


def measure_confidence(results: dict[str, list[Translation]], splits: dict, plot: Path | None) -> dict:
    table = {}
    for split, translations in results.items():
        references = splits[split][1]
        chrf = [sacrebleu.sentence_chrf(t.text, [r]).score for t, r in zip(translations, references, strict=True)]
        candidates = [confidences(t) for t in translations]
        table[split] = {key: round(spearman([c[key] for c in candidates], chrf), 4) for key in candidates[0]}
        if plot is not None and split == "test":
            _scatter([c["geometric mean of token probabilities (the API's)"] for c in candidates], chrf, plot)
    return table


def _scatter(confidence: list[float], chrf: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5, 4), dpi=120)
    axes.scatter(confidence, chrf, s=6, alpha=0.5)
    axes.set_xlabel("sentence confidence (geometric mean of token probabilities)")
    axes.set_ylabel("sentence chrF against the reference")
    axes.set_title(f"test_2016_flickr, {len(chrf)} sentences: Spearman {spearman(confidence, chrf):.2f}")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def flagged(translations: list[Translation]) -> dict[str, float]:
    """The share of translations with each warning, and with any."""
    shares = {code: sum(code in t.evidence.warnings for t in translations) / len(translations) for code in WARNINGS}
    shares["any"] = sum(bool(t.evidence.warnings) for t in translations) / len(translations)
    return {code: round(share, 4) for code, share in shares.items()}


def reference_evidence(translator: Translator, sources: list[str], references: list[str]) -> list[Translation]:
    """The references as if the model had written them (teacher-forced), with their evidence: clean
    translations, so a warning on one is a false alarm."""
    limit = translator.model.config.max_len - 1
    return forced_evidence(translator, sources, [translator.tokenizer.encode_target(r)[:limit] for r in references])


@torch.inference_mode()
def forced_evidence(translator: Translator, sources: list[str], outputs: list[list[int]]) -> list[Translation]:
    """Each output's ids (without BOS and EOS) as a finished translation of its source, with the evidence the
    translator's settings give it: the same read as a search's (translate/evidence.py), on a teacher-forced pass."""
    tokenizer, settings = translator.tokenizer, translator.decode
    found = []
    for start in range(0, len(sources), BATCH):
        src_texts, tgt_ids = sources[start : start + BATCH], outputs[start : start + BATCH]
        src_ids, logits, maps = forced_pass(translator, src_texts, tgt_ids)
        log_probs = logits.float().log_softmax(dim=-1)  # (B, T, V): position t predicts token t (EOS last)
        sentences = []
        for b, (source, source_ids, ids) in enumerate(zip(src_texts, src_ids, tgt_ids, strict=True)):
            written = torch.tensor([*ids, tokenizer.eos_id])
            token_log_probs = log_probs[b, : len(written)].gather(1, written[:, None]).squeeze(1).tolist()
            pieces, text = tokenizer.target_pieces(ids), tokenizer.decode_target(ids)
            sentences.append(
                Sentence(source, source_ids, tokenizer.source_pieces(source), text, ids, pieces, True, token_log_probs)
            )
        layer = maps.cross[alignment_layer_index(settings.alignment_layer, len(maps.cross))]  # (B, H, T, S)
        proofs = gather_evidence(sentences, layer, settings)
        found += [
            Translation(s.output_text, s.output_ids, 0.0, 0.0, evidence=e)
            for s, e in zip(sentences, proofs, strict=True)
        ]
    return found


def chrf_by_flag(translations: list[Translation], references: list[str]) -> dict[str, float]:
    """Mean sentence chrF of the outputs with a warning and of those without: do warnings point at bad outputs?"""
    scores = {True: [], False: []}
    for translation, reference in zip(translations, references, strict=True):
        scores[bool(translation.evidence.warnings)].append(sacrebleu.sentence_chrf(translation.text, [reference]).score)
    return {
        "flagged": round(statistics.mean(scores[True]), 2) if scores[True] else None,
        "not flagged": round(statistics.mean(scores[False]), 2) if scores[False] else None,
        "count flagged": len(scores[True]),
    }


def stress_set(data: Path, test_sources: list[str], seed: int = 0) -> dict[str, list[str]]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + string.punctuation + "äöüßéèçřžšč"
    noise = [
        " ".join("".join(rng.choices(alphabet, k=rng.randint(1, 10))) for _ in range(rng.randint(2, 12)))
        for _ in range(200)
    ]
    long_lines = [" ".join(test_sources[i : i + 8]) for i in range(0, 800, 8)]
    sets = {
        f"{lang} source (not English)": read_gz(data / f"test_2016_flickr.{lang}.gz")[:200]
        for lang in ("de", "fr", "cs")
    }
    return {**sets, "noise": noise, "eight sentences in one line": long_lines}


def with_length_ratio(translator: Translator, checkpoint: Path) -> Translator:
    """A checkpoint trained before `tnmt train` stored length-ratio bounds gets them from its run's prepared
    corpus (RUN/prepared beside RUN/checkpoints), as `tnmt train` computes them now."""
    if translator.decode.length_ratio_min or translator.decode.length_ratio_max:
        return translator
    directory = checkpoint.resolve().parent.parent / "prepared"
    if not directory.is_dir():
        print(f"{checkpoint}: no length-ratio bounds and no {directory}: length_ratio is not checked")
        return translator
    prepared = PreparedPairs(directory)
    low, high = length_ratio_bounds(*prepared.side_lengths())
    decode = replace(translator.decode, length_ratio_min=low, length_ratio_max=high)
    return Translator(translator.model, translator.tokenizer, decode)


def measure_cost(translator: Translator, sources: list[str], runs: int) -> dict:
    """Seconds to translate `sources` (the checkpoint's settings) without and with evidence: the median of
    `runs` rounds, the two alternating within a round."""
    seconds: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(runs):
        for evidence in (False, True):
            started = time.perf_counter()
            translator.translations(sources, evidence=evidence)
            seconds[evidence].append(time.perf_counter() - started)
    plain, with_evidence = statistics.median(seconds[False]), statistics.median(seconds[True])
    return {
        "sentences": len(sources),
        "runs": runs,
        "seconds_without": round(plain, 3),
        "seconds_with": round(with_evidence, 3),
        "ratio": round(with_evidence / plain, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, action="append", required=True)
    parser.add_argument("--undertrained", type=Path, help="an early checkpoint of the same run (stress set)")
    parser.add_argument("--limit", type=int, default=0, help="first N sentences of each split, 20 N training (0: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3, help="rounds of the cost measurement (median)")
    parser.add_argument("--cost-sentences", type=int, default=300, help="test sentences the cost is measured on")
    parser.add_argument("--cost-only", action="store_true", help="measure only the cost (no alignment, no warnings)")
    parser.add_argument("--alignment-only", action="store_true", help="measure only the alignment")
    parser.add_argument("--out", type=Path, default=RESULTS / "evidence.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = data_dir()
    if args.cost_only:
        test = read_gz(data / "test_2016_flickr.en.gz")[: args.cost_sentences]
        report = {"host": describe(), "threads": args.threads, "cost": {}}
        for checkpoint in args.checkpoint:
            translator = with_length_ratio(Translator.from_checkpoint(checkpoint), checkpoint)
            report["cost"][str(checkpoint)] = measure_cost(translator, test, args.runs)
        print(json.dumps(report["cost"], indent=1))
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        return
    cut = slice(None, args.limit or None)
    splits = {
        "val": (read_gz(data / "val.en.gz")[cut], read_gz(data / "val.de.gz")[cut]),
        "test": (read_gz(data / "test_2016_flickr.en.gz")[cut], read_gz(data / "test_2016_flickr.de.gz")[cut]),
    }
    silver = silver_links(data, splits, train_pairs=args.limit * 20 or None)
    report: dict = {"host": describe(), "sentences": {k: len(v[0]) for k, v in splits.items()}, "checkpoints": {}}
    for checkpoint in args.checkpoint:
        translator = with_length_ratio(Translator.from_checkpoint(checkpoint), checkpoint)
        entry: dict = {"decode": {k: v for k, v in vars(translator.decode).items() if "align" in k or "ratio" in k}}
        started = time.monotonic()
        entry["alignment"] = measure_alignment(translator, splits, silver)
        print(f"{checkpoint}: alignment measured in {time.monotonic() - started:.0f} s")
        # everything after reads the alignment the best variant gives (coverage warnings, the page's highlights)
        best = entry["alignment"].pop("best")
        chosen = {name: getattr(best, name) for name in ("alignment_layer", "alignment_head", "alignment_shift")}
        translator = Translator(translator.model, translator.tokenizer, replace(translator.decode, **chosen))
        entry["decode"].update(chosen)
        if args.alignment_only:
            report["checkpoints"][str(checkpoint)] = entry
            print(json.dumps(entry["alignment"]["test"], indent=1))
            continue
        results = {split: translator.translations(src, evidence=True) for split, (src, _) in splits.items()}
        plot = RESULTS / f"confidence_chrf_{checkpoint.resolve().parent.parent.name}.png"
        entry["confidence_spearman"] = measure_confidence(results, splits, plot)
        entry["false_alarms_on_references"] = {
            split: flagged(reference_evidence(translator, *splits[split])) for split in splits
        }
        entry["flagged_outputs"] = {split: flagged(translations) for split, translations in results.items()}
        entry["chrf_of_flagged_outputs"] = {
            split: chrf_by_flag(translations, splits[split][1]) for split, translations in results.items()
        }
        stress = stress_set(data, splits["test"][0])
        entry["flagged_stress"] = {
            label: flagged(translator.translations(texts, evidence=True)) for label, texts in stress.items()
        }
        if args.undertrained is not None:
            early = Translator.from_checkpoint(args.undertrained)
            early = Translator(early.model, early.tokenizer, replace(early.decode, **entry["decode"]))
            entry["flagged_stress"]["an under-trained checkpoint's test outputs"] = flagged(
                early.translations(splits["test"][0], evidence=True)
            )
        entry["cost"] = measure_cost(translator, splits["test"][0][: args.cost_sentences], args.runs)
        entry["examples"] = [
            {
                "source": s,
                "translation": t.text,
                "warnings": t.evidence.warnings,
                "confidence": round(t.evidence.confidence, 3),
            }
            for s, t in zip(splits["test"][0], results["test"], strict=True)
            if t.evidence.warnings
        ][:20]
        report["checkpoints"][str(checkpoint)] = entry
        print(json.dumps({k: v for k, v in entry.items() if k != "examples"}, indent=1))
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
