"""Language detection for `source: "auto"`: lingua as `tnmt serve` builds it, against langdetect (LibreTranslate's).

    python benchmarks/detect.py

Texts: the 4 x 1000 captions of Multi30k's test_2016_flickr in en, de, fr and cs (`TNMT_DATA_DIR`, else
../shared/data/multi30k beside the repository), whole and cut to their first 1, 2 and 3 words (a word:
whitespace-separated), every detector on every text in the same run, one thread. Detectors:

- `lingua, tnmt serve`: serve/libretranslate/detect.py's `Detector` for en, de, fr, cs: the four compared with
  its common other languages (`COMMON`), high-accuracy mode, the answer the best of the four;
- `lingua, the 4 alone`: lingua built from en, de, fr, cs only (what `COMMON` costs or gains);
- `lingua, low accuracy`: as the server's, in lingua's low-accuracy mode (trigrams only);
- `langdetect`: LibreTranslate's older detector (`DetectorFactory.seed = 0`: deterministic), its 55 languages,
  the answer the likeliest of en, de, fr, cs in its whole probability vector (as LibreTranslate keeps the
  languages it has installed). A text it cannot read ("No features in text") counts as wrong.

Per detector and text length: accuracy (the language put first is the text's own: where the server sends
it; a text without letters, a first word "2", counts as wrong for every detector), per language too; the
mean confidence (0-100) of the answer when right and when wrong (does it tell a doubtful answer?);
milliseconds per text (wall time of the whole set, after a warm-up that loads the detector's models). Also
the memory the server's detector takes in a fresh process once it has detected the four languages. Writes
benchmarks/results/detect.json and a markdown table on stdout.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

from host import describe

from tnmt.data.corpus import read_lines
from tnmt.serve.libretranslate.detect import COMMON, Detector

RESULTS = Path(__file__).resolve().parent / "results" / "detect.json"
LANGS = ("en", "de", "fr", "cs")
LENGTHS = {"1 word": 1, "2 words": 2, "3 words": 3, "sentence": None}

Detect = Callable[[str], tuple[str, float]]  # text -> (best of LANGS, its confidence 0-100)


def data_dir() -> Path:
    """The Multi30k copy: `TNMT_DATA_DIR`, else ../shared/data/multi30k beside the repository."""
    default = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"
    return Path(os.environ.get("TNMT_DATA_DIR", default))


def served() -> Detect:
    detector = Detector(LANGS)
    return lambda text: detector.detect(text)[0]


def lingua(codes: tuple[str, ...], *, low_accuracy: bool = False) -> Detect:
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    builder = LanguageDetectorBuilder.from_iso_codes_639_1(*(IsoCode639_1.from_str(code) for code in codes))
    detector = (builder.with_low_accuracy_mode() if low_accuracy else builder).build()

    def detect(text: str) -> tuple[str, float]:
        values = {
            v.language.iso_code_639_1.name.lower(): v.value for v in detector.compute_language_confidence_values(text)
        }
        best = max(LANGS, key=lambda code: values[code])
        return (best, 100 * values[best]) if values[best] > 0 else ("", 0.0)  # all 0: no answer, not LANGS[0]

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


def measure(detect: Detect, texts: dict[str, list[str]]) -> dict:
    """Accuracy, confidences and time of `detect` on `texts` (language -> texts)."""
    right_by_language, confidence = {}, {True: [], False: []}
    started = time.perf_counter()
    for language, group in texts.items():
        answers = [detect(text) for text in group]
        letters = [any(c.isalpha() for c in text) for text in group]
        right = [code == language and ok for (code, _), ok in zip(answers, letters, strict=True)]
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


def server_memory_mb(sentences: dict[str, list[str]]) -> dict:
    """RSS of a fresh process before and after the server's detector has detected 100 captions per language."""
    code = (
        "import json, sys\n"
        "from tnmt.serve.libretranslate.detect import Detector\n"
        "def rss(): return int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) / 1024\n"
        "texts = json.load(sys.stdin); before = rss(); detector = Detector(['en', 'de', 'fr', 'cs'])\n"
        "for text in texts: detector.detect(text)\n"
        "print(json.dumps({'before': round(before), 'after': round(rss())}))\n"
    )
    texts = [text for group in sentences.values() for text in group[:100]]
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(texts), capture_output=True, text=True)
    done.check_returncode()
    return json.loads(done.stdout)


def main() -> None:
    sentences = {language: read_lines(data_dir() / f"test_2016_flickr.{language}.gz") for language in LANGS}
    detectors = {
        "lingua, tnmt serve": served(),
        "lingua, the 4 alone": lingua(LANGS),
        "lingua, low accuracy": lingua(tuple(sorted({*LANGS, *COMMON})), low_accuracy=True),
        "langdetect": langdetect(),
    }
    warm_up = {language: group[:20] for language, group in sentences.items()}
    rows = []
    for name, detect in detectors.items():
        measure(detect, warm_up)
        for length, words in LENGTHS.items():
            texts = {
                language: [" ".join(text.split()[:words]) if words else text for text in group]
                for language, group in sentences.items()
            }
            rows.append({"detector": name, "text": length, **measure(detect, texts)})
            print(f"{name:22} {length:9} {rows[-1]['accuracy']:.4f} {rows[-1]['ms_per_text']:.3f} ms", file=sys.stderr)
    result = {
        "command": "python benchmarks/detect.py",
        "data": {
            language: f"test_2016_flickr.{language}.gz, {len(group)} captions" for language, group in sentences.items()
        },
        "common_languages": list(COMMON),
        "versions": {name: version(name) for name in ("lingua-language-detector", "langdetect")},
        "rows": rows,
        "server_detector_rss_mb": server_memory_mb(sentences),
        "host": describe(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print("| detector | text | accuracy | en | de | fr | cs | confidence right / wrong | ms per text |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        by = row["accuracy_by_language"]
        print(
            f"| {row['detector']} | {row['text']} | {100 * row['accuracy']:.1f}% | "
            + " | ".join(f"{100 * by[language]:.1f}" for language in LANGS)
            + f" | {row['mean_confidence_right']} / {row['mean_confidence_wrong']} | {row['ms_per_text']:.3f} |"
        )


if __name__ == "__main__":
    main()
