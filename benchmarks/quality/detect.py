"""Language detection for `source: "auto"`: lingua as `tnmt serve` builds it, its calibration and its refusals.

    python -m benchmarks.quality.detect

Texts: Multi30k's captions in en, de, fr and cs (`TNMT_DATA_DIR`, else ../shared/data/multi30k beside the
repository): test_2016_flickr's 1000 per language to measure, val's 1014 to fit, whole and cut to their first
words (a word: whitespace-separated). One thread. Writes benchmarks/results/detect.json and markdown tables.

1. `compare` (test; whole, 1, 2 and 3 words): which of en, de, fr, cs each detector puts first (the text's own:
   right; a first word without letters, "2", counts as wrong for every detector), per language too; the mean
   confidence (0-100) of that answer when right and when wrong; milliseconds per text (after a warm-up that
   loads the models). Detectors: `lingua, tnmt serve` (detect.py's `Detector` for the four, the first of them in
   its ranking), `lingua, the 4 alone` (lingua over the four only, its own values), `lingua, low accuracy`
   (trigrams only, over the server's languages) and `langdetect` (LibreTranslate's older detector, seeded, its
   55 languages, the likeliest of the four in its whole probability vector; "No features in text" is wrong).
2. `fit` (val; whole, 1, 2 and 3 words): the log-loss of the text's language under detect.py's `calibrated`,
   over length exponents 0, 0.25, 0.5, 0.75, 1 and sharpness 0.05 to 3: the constants detect.py uses.
3. `calibration` (test; whole and 1-6 words): what the server's `/detect` answers (the best of every language
   it compares), against lingua's own values: accuracy, the median confidence of the right answers, and the
   accuracy of all the answers given at that confidence or more, per length and language; reliability bins
   (answers grouped by confidence: their mean confidence against their accuracy).
4. `refusals` (val and test; whole and 1-6 words): a server translating from one of the four only refuses a
   text with `source: "auto"` when its best language is another one at the threshold or more (translate.py's
   `route_auto`). Per threshold, served language and length: the texts in the served language refused (false),
   the texts in the three others refused (right) and refused under their own name.
5. Examples, and memory: the RSS of a fresh process once the server's detector has detected 100 captions
   per language, and the same for lingua over its 75 languages (with the seconds of that first pass).
"""

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

from benchmarks.common.host import describe
from tnmt.data.corpus import read_lines
from tnmt.serve.libretranslate.detect import COMMON, CONFIDENT, LENGTH_EXPONENT, SHARPNESS, Detector, calibrated

RESULTS = Path(__file__).resolve().parents[1] / "results" / "detect.json"
LANGS = ("en", "de", "fr", "cs")
COMPARED = {"1 word": 1, "2 words": 2, "3 words": 3, "sentence": None}
LENGTHS = {**{f"{n} word{'s' * (n > 1)}": n for n in range(1, 7)}, "sentence": None}
THRESHOLDS = (90.0, 95.0, CONFIDENT, 99.9)
BINS = (0, 50, 70, 80, 90, 95, 99, 100.01)
EXAMPLES = ("A dog runs on the beach.", "Un chien court sur la plage.", "Ein Hund läuft am Strand.", "Hello", "A deer")

Detect = Callable[[str], tuple[str, float]]  # text -> (a language, its confidence 0-100)
Labelled = dict[str, list[str]]  # language -> its texts


def data_dir() -> Path:
    """The Multi30k copy: `TNMT_DATA_DIR`, else ../shared/data/multi30k beside the repository."""
    default = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"
    return Path(os.environ.get("TNMT_DATA_DIR", default))


def cut(sentences: Labelled, words: int | None) -> Labelled:
    return {
        language: [" ".join(s.split()[:words]) if words else s for s in group] for language, group in sentences.items()
    }


def letters(text: str) -> int:
    return sum(c.isalpha() for c in text)  # as detect.py's Detector counts them


def lingua_values(codes: tuple[str, ...], *, low_accuracy: bool = False) -> Callable[[str], dict[str, float]]:
    """Lingua over `codes`: its own confidence (0-1) per code."""
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    builder = LanguageDetectorBuilder.from_iso_codes_639_1(*(IsoCode639_1.from_str(code) for code in codes))
    detector = (builder.with_low_accuracy_mode() if low_accuracy else builder).build()
    return lambda text: {
        v.language.iso_code_639_1.name.lower(): v.value for v in detector.compute_language_confidence_values(text)
    }


def best_of_four(values: Callable[[str], dict[str, float]]) -> Detect:
    def detect(text: str) -> tuple[str, float]:
        found = values(text)
        best = max(LANGS, key=lambda code: found[code])
        return (best, 100 * found[best]) if found[best] > 0 else ("", 0.0)  # all 0: no answer, not LANGS[0]

    return detect


def langdetect() -> Detect:
    from langdetect import DetectorFactory, LangDetectException
    from langdetect.detector_factory import PROFILES_DIRECTORY

    DetectorFactory.seed = 0
    factory = DetectorFactory()
    factory.load_profile(PROFILES_DIRECTORY)

    def detect(text: str) -> tuple[str, float]:
        detector = factory.create()
        detector.append(text)
        try:
            detector.get_probabilities()  # fills langprob, the whole vector (get_probabilities keeps > 0.1 only)
        except LangDetectException:
            return "", 0.0
        probability = dict(zip(detector.langlist, detector.langprob, strict=True))
        best = max(LANGS, key=lambda code: probability[code])
        return best, 100 * probability[best]

    return detect


def measure(detect: Detect, texts: Labelled) -> dict:
    """Accuracy, confidences and time of `detect` on `texts`."""
    right_by_language, confidence = {}, {True: [], False: []}
    started = time.perf_counter()
    for language, group in texts.items():
        answers = [detect(text) for text in group]
        right = [code == language and letters(text) > 0 for (code, _), text in zip(answers, group, strict=True)]
        right_by_language[language] = sum(right) / len(group)
        for ok, (_, value) in zip(right, answers, strict=True):
            confidence[ok].append(value)
    seconds = time.perf_counter() - started
    n = sum(len(group) for group in texts.values())
    return {
        "accuracy": round(len(confidence[True]) / n, 4),
        "accuracy_by_language": {language: round(value, 4) for language, value in right_by_language.items()},
        "mean_confidence_right": round(statistics.fmean(confidence[True]), 1) if confidence[True] else None,
        "mean_confidence_wrong": round(statistics.fmean(confidence[False]), 1) if confidence[False] else None,
        "ms_per_text": round(1000 * seconds / n, 3),
    }


def compare(detector: Detector, sentences: Labelled) -> list[dict]:
    detectors = {
        "lingua, tnmt serve": lambda text: next((c, p) for c, p in detector.detect(text) if c in LANGS),
        "lingua, the 4 alone": best_of_four(lingua_values(LANGS)),
        "lingua, low accuracy": best_of_four(lingua_values(detector.compared, low_accuracy=True)),
        "langdetect": langdetect(),
    }
    rows = []
    for name, detect in detectors.items():
        measure(detect, {language: group[:20] for language, group in sentences.items()})  # warm-up: loads models
        for length, words in COMPARED.items():
            rows.append({"detector": name, "text": length, **measure(detect, cut(sentences, words))})
            print(f"{name:22} {length:9} {rows[-1]['accuracy']:.4f} {rows[-1]['ms_per_text']:.3f} ms", file=sys.stderr)
    return rows


def fit(raw: dict[str, list[tuple[str, int, dict[str, float]]]]) -> dict:
    """The log-loss of `calibrated` on `raw` (length -> (language, letters, lingua's values) per text) over a grid."""
    texts = [text for length in COMPARED for text in raw[length]]

    def loss(sharpness: float, exponent: float) -> float:
        probabilities = (
            calibrated(values, n, sharpness=sharpness, exponent=exponent).get(language, 0.0)
            for language, n, values in texts
        )
        return -statistics.fmean(math.log(max(p, 1e-6)) for p in probabilities)

    grid = {}
    for exponent in (0.0, 0.25, 0.5, 0.75, 1.0):
        losses = {sharpness / 20: loss(sharpness / 20, exponent) for sharpness in range(1, 61)}
        best = min(losses, key=losses.__getitem__)
        grid[str(exponent)] = {"best_sharpness": best, "log_loss": round(losses[best], 4)}
    return {
        "texts": "val, whole and cut to 1, 2, 3 words",
        "by_exponent": grid,
        "used": {"exponent": LENGTH_EXPONENT, "sharpness": SHARPNESS},
        "uncalibrated_log_loss": round(-statistics.fmean(math.log(max(v.get(g, 0.0), 1e-6)) for g, _, v in texts), 4),
    }


def summary(answers: list[tuple[str, float, bool]]) -> dict:
    """Accuracy, median confidence of the right answers and the accuracy of the answers at it or more."""
    right = [confidence for _, confidence, ok in answers if ok]
    median = statistics.median(right) if right else 0.0
    above = [ok for _, confidence, ok in answers if confidence >= median]
    return {
        "n": len(answers),
        "accuracy": round(sum(ok for *_, ok in answers) / len(answers), 4),
        "median_confidence_right": round(median, 1),
        "accuracy_at_or_above_median": round(sum(above) / len(above), 4),
    }


def calibration(detector: Detector, raw: dict, sentences: Labelled) -> dict:
    """The server's answers (best of all compared) and lingua's own, per length and language; over all lengths,
    reliability bins and the expected calibration error (|confidence - accuracy| averaged over ten equal bins,
    weighted by their answers)."""
    out: dict = {}
    every: dict[str, list] = {"server": [], "lingua_uncalibrated": []}
    for length, words in LENGTHS.items():
        labelled = [(language, text) for language, texts in cut(sentences, words).items() for text in texts]
        answers: dict[str, list] = {"server": [], "lingua_uncalibrated": []}
        for (language, text), (_, _, values) in zip(labelled, raw[length], strict=True):
            code, confidence = detector.detect(text)[0]
            answers["server"].append((language, confidence, code == language and confidence > 0))
            best = max(values, key=values.__getitem__)
            answers["lingua_uncalibrated"].append((language, 100 * values[best], best == language and values[best] > 0))
        for name, found in answers.items():
            every[name] += found
            by_language = {lang: summary([a for a in found if a[0] == lang]) for lang in LANGS}
            out.setdefault(name, {"by_length": {}})["by_length"][length] = {
                **summary(found),
                "by_language": by_language,
            }
    for name, found in every.items():
        out[name]["reliability"] = [
            row for low, high in zip(BINS, BINS[1:], strict=False) if (row := _bin(found, low, high))
        ]
        ten = [_bin(found, 10 * i, 10 * i + (10.01 if i == 9 else 10)) for i in range(10)]
        out[name]["expected_calibration_error"] = round(
            sum(row["n"] * abs(row["mean"] - row["accuracy"]) for row in ten if row) / len(found), 2
        )
    return out


def _bin(answers: list[tuple[str, float, bool]], low: float, high: float) -> dict | None:
    group = [(confidence, ok) for _, confidence, ok in answers if low <= confidence < high]
    if not group:
        return None
    return {
        "confidence": f"[{low}, {high})" if high <= 100 else f"[{low}, 100]",
        "n": len(group),
        "mean": round(statistics.fmean(c for c, _ in group), 1),
        "accuracy": round(100 * sum(ok for _, ok in group) / len(group), 1),
    }


def refusals(detector: Detector, sentences: Labelled) -> dict:
    """Per threshold, served language and length: the texts refused on a server translating from that one only."""
    out: dict = {}
    for length, words in LENGTHS.items():
        found = {
            language: [detector.detect(text)[0] for text in group] for language, group in cut(sentences, words).items()
        }
        for threshold in THRESHOLDS:
            for served in LANGS:
                own = [code != served and confidence >= threshold for code, confidence in found[served]]
                other = [
                    (code, confidence, language)
                    for language in LANGS
                    if language != served
                    for code, confidence in found[language]
                ]
                refused = [code != served and confidence >= threshold for code, confidence, _ in other]
                named = [ok and code == language for ok, (code, _, language) in zip(refused, other, strict=True)]
                out.setdefault(str(threshold), {}).setdefault(served, {})[length] = {
                    "false": sum(own),
                    "of": len(own),
                    "right_percent": round(100 * sum(refused) / len(refused), 1),
                    "named_percent": round(100 * sum(named) / len(named), 1),
                }
    return out


def memory(sentences: Labelled) -> dict:
    """RSS (MB) of fresh processes before and after detecting 100 captions per language: the server's detector,
    and lingua over its 75 languages (with the seconds of that first pass, which loads the models)."""
    code = (
        "import json, sys, time\n"
        "from lingua import LanguageDetectorBuilder\n"
        "from tnmt.serve.libretranslate.detect import Detector\n"
        "def rss(): return int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) / 1024\n"
        "texts = json.load(sys.stdin); before = rss(); started = time.perf_counter()\n"
        "if sys.argv[1] == 'server':\n"
        "    detect = Detector(['en', 'de', 'fr', 'cs']).detect\n"
        "else:\n"
        "    detect = LanguageDetectorBuilder.from_all_languages().build().compute_language_confidence_values\n"
        "for text in texts: detect(text)\n"
        "seconds = round(time.perf_counter() - started, 1)\n"
        "print(json.dumps({'before': round(before), 'after': round(rss()), 'first_pass_s': seconds}))\n"
    )
    texts = json.dumps([text for group in sentences.values() for text in group[:100]])
    found = {}
    for which in ("server", "all 75"):
        done = subprocess.run([sys.executable, "-c", code, which], input=texts, capture_output=True, text=True)
        done.check_returncode()
        found[which] = json.loads(done.stdout)
    return found


def main() -> None:
    splits = {
        split: {language: read_lines(data_dir() / f"{split}.{language}.gz") for language in LANGS}
        for split in ("test_2016_flickr", "val")
    }
    test, val = splits["test_2016_flickr"], splits["val"]
    detector = Detector(LANGS)
    values = lingua_values(detector.compared)
    raw = {
        split: {
            length: [
                (lang, letters(text), values(text)) for lang, texts in cut(sentences, words).items() for text in texts
            ]
            for length, words in LENGTHS.items()
        }
        for split, sentences in splits.items()
    }
    examples = {}
    for text in EXAMPLES:
        own = values(text)
        best = max(own, key=own.__getitem__)
        examples[text] = {"lingua": [best, round(100 * own[best], 1)], "server": detector.detect(text)[:2]}
    result = {
        "command": "python -m benchmarks.quality.detect",
        "data": {f"{split}.{lang}.gz": len(group) for split, s in splits.items() for lang, group in s.items()},
        "common_languages": list(COMMON),
        "confident": CONFIDENT,
        "versions": {name: version(name) for name in ("lingua-language-detector", "langdetect")},
        "rows": compare(detector, test),
        "fit": fit(raw["val"]),
        "calibration": calibration(detector, raw["test_2016_flickr"], test),
        "refusals": {"val": refusals(detector, val), "test": refusals(detector, test)},
        "examples": examples,
        "rss_mb": memory(test),
        "host": describe(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print_tables(result)


def print_tables(result: dict) -> None:
    print("| detector | text | accuracy | en | de | fr | cs | confidence right / wrong | ms per text |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in result["rows"]:
        by = row["accuracy_by_language"]
        print(
            f"| {row['detector']} | {row['text']} | {100 * row['accuracy']:.1f}% | "
            + " | ".join(f"{100 * by[language]:.1f}" for language in LANGS)
            + f" | {row['mean_confidence_right']} / {row['mean_confidence_wrong']} | {row['ms_per_text']:.3f} |"
        )
    print("\n| text | accuracy | median confidence right: server / lingua | accuracy at it or more: server / lingua |")
    print("| --- | --- | --- | --- |")
    server, lingua = (result["calibration"][name]["by_length"] for name in ("server", "lingua_uncalibrated"))
    for length in LENGTHS:
        s, g = server[length], lingua[length]
        print(
            f"| {length} | {100 * s['accuracy']:.1f}% | "
            f"{s['median_confidence_right']} / {g['median_confidence_right']} | "
            f"{100 * s['accuracy_at_or_above_median']:.1f}% / {100 * g['accuracy_at_or_above_median']:.1f}% |"
        )
    for name in ("server", "lingua_uncalibrated"):
        found = result["calibration"][name]
        print(f"\n{name}: expected calibration error {found['expected_calibration_error']}")
        print("| confidence | answers | mean confidence | accuracy |\n| --- | --- | --- | --- |")
        for row in found["reliability"]:
            print(f"| {row['confidence']} | {row['n']} | {row['mean']} | {row['accuracy']}% |")
    print("\n| threshold | split | text | English refused | de, fr, cs refused (under their name) |")
    print("| --- | --- | --- | --- | --- |")
    for split, found in result["refusals"].items():
        for threshold, by_served in found.items():
            for length, cell in by_served["en"].items():
                print(
                    f"| {threshold} | {split} | {length} | {cell['false']} of {cell['of']} | "
                    f"{cell['right_percent']}% ({cell['named_percent']}%) |"
                )


if __name__ == "__main__":
    main()
