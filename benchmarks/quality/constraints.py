"""Steering measured on test_2016_flickr (issue 50): terms used, phrases avoided, spans kept, loops, speed.

    python -m benchmarks.quality.constraints --checkpoint outputs/quickstart/run/best [--limit 1000] [--threads 2]

The English sources and German references of test_2016_flickr (`TNMT_DATA_DIR` or ../shared/data/multi30k
beside the repository) translated with the checkpoint's settings (beam 4):

- plain: no steering, loops blocked (the default) and not: BLEU, and how many outputs the evidence flags
  "repetition";
- oracle terms (Post & Vilar's experiment): per sentence up to two reference words (4+ letters) that the plain
  output lacks, required; BLEU against plain (it should rise: the terms come from the reference), and the share
  met where the search could meet them;
- synonym glossary: `GLOSSARY` below (English word -> its German forms and synonyms) applied where its words
  occur: chrF and BLEU against plain, terms met;
- avoid: per sentence the plain output's longest word, avoided: how often it still appears (target 0), BLEU;
- do-not-translate: a name, a URL or a number with its unit inserted into each source (names and numbers listed
  as do-not-translate; URLs and e-mail addresses found by the verbatim rules): the share that comes back
  verbatim (target 100%), and BLEU of the rest (the inserted span removed) against plain (target: within 1);
- speed: beam 4 at batch 16 and 64, two required terms a sentence (the oracle's, padded with synonyms'), against
  the same sentences unconstrained: median seconds of `--repeats` alternating runs (target <= 1.5x);
- alternatives: `word_replacements` for the least probable word of each of 30 sentences, k = 5: median and p90
  latency (target <= 150 ms at 2 threads).

Writes benchmarks/results/constraints.json (with the host).
"""

import argparse
import json
import re
import statistics
import time
from dataclasses import replace
from pathlib import Path

import sacrebleu
import torch

from benchmarks.common.host import describe
from benchmarks.quality.markup import data_dir, read
from tnmt.translate.glossary import GlossaryEntry
from tnmt.translate.replacements import word_replacements
from tnmt.translate.steering import Steering
from tnmt.translate.translator import Translator

GLOSSARY = {  # English word -> German forms a translator may use (inflections and synonyms)
    "dog": "Hund | Hunde | Hundes",
    "man": "Mann | Mannes | Männer",
    "woman": "Frau | Frauen",
    "child": "Kind | Kinder | Kindes",
    "boy": "Junge | Jungen | Knabe",
    "girl": "Mädchen",
    "street": "Straße | Straßen",
    "water": "Wasser | Gewässer",
    "beach": "Strand | Strandes",
    "shirt": "Hemd | T-Shirt | Shirt | Oberteil",
    "bike": "Fahrrad | Rad | Fahrrads",
    "car": "Auto | Wagen | Autos",
    "red": "rot | rote | roten | roter | rotes | rotem",
    "blue": "blau | blaue | blauen | blauer | blaues | blauem",
    "white": "weiß | weiße | weißen | weißer | weißes | weißem",
    "black": "schwarz | schwarze | schwarzen | schwarzer | schwarzes | schwarzem",
    "green": "grün | grüne | grünen | grüner | grünes | grünem",
    "two": "zwei",
    "three": "drei",
    "ball": "Ball | Balls",
    "grass": "Gras | Rasen | Wiese",
    "snow": "Schnee",
    "building": "Gebäude | Gebäudes",
    "people": "Menschen | Leute | Personen",
}
NAMES = ["Jonas", "Mariam", "Kowalski", "Okonkwo"]
URLS = ["https://example.org/p/17", "www.tnmt.dev/docs", "mail@example.com"]
UNITS = ["42 kg", "3.5 km", "250 ml"]


def words(text: str) -> list[str]:
    return re.findall(r"\w[\w-]*", text)


def bleu(hypotheses: list[str], references: list[str]) -> float:
    return round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2)


def chrf(hypotheses: list[str], references: list[str]) -> float:
    return round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2)


def met_share(results, steering) -> dict:
    asked = sum(len(r.constraints) for r in results)
    met = sum(c.met for r in results for c in r.constraints)
    return {"constraints": asked, "met": met, "met_share": round(met / max(asked, 1), 4)}


def oracle_terms(plain: list[str], references: list[str]) -> list[tuple[str, ...]]:
    """Per sentence, up to two reference words (4+ letters) the plain output lacks."""
    terms = []
    for output, reference in zip(plain, references, strict=True):
        have = {w.casefold() for w in words(output)}
        missing = [w for w in dict.fromkeys(words(reference)) if len(w) >= 4 and w.casefold() not in have]
        terms.append(tuple(missing[:2]))
    return terms


def timed(translator: Translator, texts, settings, steering, repeats: int) -> tuple[float, float]:
    """Median seconds of plain and steered translation of `texts`, runs alternating."""
    plain, steered = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        translator.translations(texts, settings)
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        translator.translations(texts, settings, steering=steering)
        steered.append(time.perf_counter() - start)
    return statistics.median(plain), statistics.median(steered)


def quality(translator, settings, sources, references, plain, terms, result) -> None:
    """The oracle terms, the synonym glossary, avoided words and kept spans (the module docstring)."""
    steering = [Steering(include=tuple((t,) for t in ts)) for ts in terms]
    oracle = translator.translations(sources, settings, steering=steering)
    limit_met = [r for r in oracle if r.constraints]
    result["oracle_terms"] = {
        "bleu": bleu([r.text for r in oracle], references),
        "bleu_plain": result["plain"]["bleu"],
        "sentences_with_terms": len(limit_met),
        **met_share(oracle, steering),
    }
    print("oracle", result["oracle_terms"], flush=True)

    glossary = tuple(
        GlossaryEntry(source, tuple(f.strip() for f in forms.split("|"))) for source, forms in GLOSSARY.items()
    )
    synonyms = translator.translations(sources, settings, steering=[Steering(glossary=glossary)] * len(sources))
    applied = [i for i, r in enumerate(synonyms) if r.constraints]
    result["synonym_glossary"] = {
        "entries": len(glossary),
        "sentences_applied": len(applied),
        "chrf": chrf([r.text for r in synonyms], references),
        "chrf_plain": result["plain"]["chrf"],
        "bleu": bleu([r.text for r in synonyms], references),
        "chrf_applied_only": chrf([synonyms[i].text for i in applied], [references[i] for i in applied]),
        "chrf_plain_applied_only": chrf([plain[i] for i in applied], [references[i] for i in applied]),
        "outputs_changed": sum(synonyms[i].text != plain[i] for i in applied),
        **met_share(synonyms, None),
    }
    print("synonyms", result["synonym_glossary"], flush=True)

    avoided = [max(words(p), key=len) if words(p) else "" for p in plain]
    avoid = [Steering(avoid=(w,)) if w else None for w in avoided]
    avoiding = translator.translations(sources, settings, steering=avoid)
    still = sum(
        bool(w) and bool(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", r.text, flags=re.IGNORECASE))
        for w, r in zip(avoided, avoiding, strict=True)
    )
    result["avoid"] = {
        "phrases": sum(bool(w) for w in avoided),
        "still_present": still,
        "bleu": bleu([r.text for r in avoiding], references),
    }
    print("avoid", result["avoid"], flush=True)

    inserted, spans, keep = [], [], []
    for i, source in enumerate(sources):
        kind = i % 3
        span = (NAMES, URLS, UNITS)[kind][i % len((NAMES, URLS, UNITS)[kind])]
        if kind == 0:
            text = f"{span}: {source}"
        elif kind == 1:
            text = f"{source.rstrip('.')} ({span})."
        else:
            text = f"{source.rstrip('.')}, {span}."
        inserted.append(text)
        spans.append(span)
        keep.append(Steering(do_not_translate=(*NAMES, *UNITS)))
    kept = translator.translations(inserted, settings, steering=keep)
    verbatim = [span in r.text for span, r in zip(spans, kept, strict=True)]
    rest = [re.sub(r"\s+", " ", r.text.replace(span, " ")).strip(" ,:()") for span, r in zip(spans, kept, strict=True)]
    result["do_not_translate"] = {
        "sentences": len(inserted),
        "verbatim_share": round(sum(verbatim) / len(verbatim), 4),
        "verbatim_share_by_kind": {
            name: round(sum(verbatim[k::3]) / len(verbatim[k::3]), 4) for k, name in enumerate(("name", "url", "unit"))
        },
        "bleu_rest": bleu(rest, references),
        "bleu_plain": result["plain"]["bleu"],
        "examples": [{"source": inserted[i], "output": kept[i].text} for i in range(3)],
    }
    print("dnt", result["do_not_translate"], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "constraints.json"))
    parser.add_argument("--speed-only", action="store_true", help="measure speed again; keep --out's other parts")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    root = data_dir()
    sources = read(root / "test_2016_flickr.en.gz")[: args.limit]
    references = read(root / "test_2016_flickr.de.gz")[: args.limit]
    translator = Translator.from_checkpoint(args.checkpoint)
    settings = translator.decode
    result: dict = {
        "host": describe(),
        "checkpoint": args.checkpoint,
        "sentences": len(sources),
        "beam_size": settings.beam_size,
    }

    plain_results = translator.translations(sources, settings, evidence=True)
    plain = [r.text for r in plain_results]
    loose = translator.translations(sources, replace(settings, block_loops=False), evidence=True)
    result["plain"] = {
        "bleu": bleu(plain, references),
        "chrf": chrf(plain, references),
        "repetition_flagged": sum("repetition" in r.evidence.warnings for r in plain_results),
        "loops_allowed": {
            "bleu": bleu([r.text for r in loose], references),
            "repetition_flagged": sum("repetition" in r.evidence.warnings for r in loose),
            "outputs_differing": sum(a.text != b.text for a, b in zip(loose, plain_results, strict=True)),
        },
    }
    print("plain", result["plain"], flush=True)

    terms = oracle_terms(plain, references)
    if args.speed_only:  # the quality parts as the last full run measured them
        result = {**json.loads(Path(args.out).read_text()), "host": describe()}
    else:
        quality(translator, settings, sources, references, plain, terms, result)

    padded = []
    for ts, source in zip(terms, sources, strict=True):
        extra = [
            tuple(f.strip() for f in GLOSSARY[w.lower()].split("|")) for w in words(source) if w.lower() in GLOSSARY
        ]
        two = [(t,) for t in ts] + extra
        padded.append(Steering(include=tuple(two[:2])))
    result["speed"] = []
    for batch in (16, 64):
        texts = sources[: batch * 4]
        chosen = padded[: batch * 4]
        run = replace(settings, batch_size=batch)
        plain_s, steered_s = timed(translator, texts, run, chosen, args.repeats)
        result["speed"].append(
            {
                "batch_size": batch,
                "sentences": len(texts),
                "constraints_per_sentence": round(sum(len(s.include) for s in chosen) / len(chosen), 2),
                "plain_s": round(plain_s, 3),
                "constrained_s": round(steered_s, 3),
                "ratio": round(steered_s / plain_s, 3),
                "threads": args.threads,
            }
        )
        print("speed", result["speed"][-1], flush=True)

    latencies = []
    for i in range(30):
        r = plain_results[i]
        if not r.text.split():
            continue
        position = min(range(len(r.evidence.word_probs)), key=lambda j: r.evidence.word_probs[j])
        start = time.perf_counter()
        word_replacements(translator, sources[i], position, 5, settings)
        latencies.append(time.perf_counter() - start)
    latencies.sort()
    result["alternatives"] = {
        "requests": len(latencies),
        "k": 5,
        "median_ms": round(1000 * statistics.median(latencies), 1),
        "p90_ms": round(1000 * latencies[int(0.9 * (len(latencies) - 1))], 1),
        "threads": args.threads,
    }
    print("alternatives", result["alternatives"], flush=True)
    Path(args.out).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
