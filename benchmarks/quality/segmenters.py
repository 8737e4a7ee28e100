"""Three sentence segmenters on hand-written hard cases in en, de, fr and cs: which one should tnmt use?

    python -m benchmarks.quality.segmenters [--out benchmarks/results/segmenters.json] [--runs 5]

A translation model is trained on sentences, so a paragraph must be cut into sentences before it is translated and
put back together after. A wrong cut costs twice: a false split (after "Dr." or "z. B.") gives the model two
fragments it translates badly, a missed split gives it a line longer than it was trained on. Whitespace matters
too: the text between sentences (two spaces, a newline) should come back as it was. Compared:

- sentencex (Wikimedia): `sentencex.segment(language, text)`, each sentence with its trailing whitespace; its own
  offsets from `sentencex.get_sentence_boundaries`;
- pysbd: `pysbd.Segmenter(language=..., clean=False, char_span=True)`. It has no Czech: Czech is segmented with its
  Slovak rules and marked `"supported": false, "language_used": "sk"`; `total_en_de_fr` leaves Czech out;
- Moses' nonbreaking-prefix splitter (package sentence-splitter): `SentenceSplitter(language=...).split(text)`,
  sentences stripped and runs of spaces collapsed, so its sentences are located back in the text here.

The cases (`segmenters_cases.tsv` beside this file: language, text, expected sentences joined by " ||| ", kind;
"\\n" and "\\uXXXX" in a field are a newline and that character) are abbreviations, ordinals, decimals, times,
ellipses, quotes, URLs, e-mail addresses, emoji, parentheses, missing final punctuation, whitespace and plain
captions. Per segmenter and language:

- `accuracy`: the share of cases whose sentences, stripped and with runs of whitespace read as one space, equal
  the expected ones (empty segments dropped; whitespace is judged apart, below);
- `false_splits`, `missed_splits`: boundaries, as positions among the text's non-whitespace characters, that the
  segmenter adds or lacks against the expected ones;
- `round_trip`: the share of cases where joining the output ("".join) gives back the input exactly;
  `located`: the share whose sentences are found in the input verbatim and in order with only whitespace between
  them, so that cutting the input at their starts gives it back (true of every round trip);
  `whitespace_changed`: the share found only with whitespace inside a sentence changed; `text_changed`: the share
  whose non-whitespace characters differ from the input's (none should); `offsets_match`: the share where the
  library's own character offsets (sentencex, pysbd) slice the input into exactly its sentences;
- speed: sentences a second on a text of at least 2,000 expected sentences, the language's cases joined by spaces
  over and over, the median of `--runs` runs (one warm-up first), with whether that long text round-trips.

Writes the JSON with per-language and total figures, the libraries' versions and the host, and prints a table.
"""

import argparse
import json
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from importlib.metadata import version
from pathlib import Path

CASES = Path(__file__).with_name("segmenters_cases.tsv")
LANGUAGES = ("en", "de", "fr", "cs")
SEPARATOR = " ||| "
SEGMENTERS = ("sentencex", "pysbd", "moses")
PACKAGES = {"sentencex": "sentencex", "pysbd": "pysbd", "moses": "sentence-splitter"}

Segment = Callable[[str], list[str]]


@dataclass(frozen=True)
class Case:
    language: str
    text: str
    expected: tuple[str, ...]
    kind: str = ""


def unescape(field: str) -> str:
    r"""A TSV field with "\n" a newline and "\uXXXX" that character."""
    return re.sub(r"\\(n|u[0-9a-fA-F]{4})", lambda m: "\n" if m[1] == "n" else chr(int(m[1][1:], 16)), field)


def read_cases(path: Path = CASES) -> list[Case]:
    lines = path.read_text(encoding="utf-8").splitlines()
    cases = []
    for line in lines[1:]:
        language, text, expected, kind = line.split("\t")
        cases.append(Case(language, unescape(text), tuple(unescape(s) for s in expected.split(SEPARATOR)), kind))
    return cases


def normalised(sentences: Sequence[str]) -> list[str]:
    """Sentences stripped, runs of whitespace as one space, empty ones dropped."""
    return [" ".join(s.split()) for s in sentences if s.strip()]


def boundaries(sentences: Sequence[str]) -> set[int]:
    """Where sentences end, counted in non-whitespace characters: comparable whatever whitespace was kept."""
    ends, count = set(), 0
    for sentence in normalised(sentences)[:-1]:
        count += len("".join(sentence.split()))
        ends.add(count)
    return ends


def locate(text: str, sentences: Sequence[str]) -> tuple[list[int] | None, bool]:
    """The start of each sentence in `text`, in order, only whitespace between them (None when one is not there),
    and whether one was found only with whitespace inside it changed (Moses collapses runs of spaces)."""
    starts, cursor, changed = [], 0, False
    for sentence in sentences:
        core = sentence.strip()
        if not core:
            continue
        start = re.compile(r"\s*").match(text, cursor).end()
        if text.startswith(core, start):
            cursor = start + len(core)
        else:
            found = re.compile(r"\s+".join(re.escape(word) for word in core.split())).match(text, start)
            if found is None:
                return None, changed
            cursor, changed = found.end(), True
        starts.append(start)
    if text[cursor:].strip():
        return None, changed
    return starts, changed


def score(cases: Sequence[Case], segment: Segment, spans: Callable[[str], list[str]] | None = None) -> dict:
    """How `segment` splits `cases`: accuracy, wrong boundaries, round trip; `wrong` lists the cases it gets wrong.

    `spans`, when given, cuts a text with the library's own offsets: `offsets_match` is the share of cases where
    that gives exactly `segment`'s sentences."""
    exact = false_splits = missed_splits = round_trip = located = ws_changed = text_changed = offsets_match = 0
    wrong = []
    for case in cases:
        got = segment(case.text)
        ok = normalised(got) == normalised(case.expected)
        exact += ok
        predicted, expected = boundaries(got), boundaries(case.expected)
        false_splits += len(predicted - expected)
        missed_splits += len(expected - predicted)
        round_trip += "".join(got) == case.text
        starts, changed = locate(case.text, got)
        located += starts is not None and not changed
        ws_changed += starts is not None and changed
        text_changed += "".join("".join(got).split()) != "".join(case.text.split())
        if spans is not None:
            offsets_match += spans(case.text) == list(got)
        if not ok:
            wrong.append({"kind": case.kind, "text": case.text, "expected": list(case.expected), "got": list(got)})
    n = len(cases)
    result = {
        "cases": n,
        "exact": exact,
        "accuracy": exact / n if n else 0.0,
        "false_splits": false_splits,
        "missed_splits": missed_splits,
        "expected_boundaries": sum(len(boundaries(case.expected)) for case in cases),
        "round_trip": round_trip / n if n else 0.0,
        "located": located / n if n else 0.0,
        "whitespace_changed": ws_changed / n if n else 0.0,
        "text_changed": text_changed / n if n else 0.0,
        "offsets_match": offsets_match / n if spans is not None and n else None,
        "wrong": wrong,
    }
    return result


def long_text(cases: Sequence[Case], sentences: int = 2000) -> tuple[str, int]:
    """The cases' texts joined by spaces, over and over, until they hold `sentences` expected sentences."""
    parts, count = [], 0
    while count < sentences:
        for case in cases:
            parts.append(case.text)
            count += len(case.expected)
            if count >= sentences:
                break
    return " ".join(parts), count


def speed(segment: Segment, text: str, sentences: int, runs: int) -> dict:
    got = segment(text)  # warm-up, and the round trip of the long text
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        segment(text)
        seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    return {
        "sentences": sentences,
        "chars": len(text),
        "segments": len(got),
        "seconds": [round(s, 6) for s in seconds],
        "median_s": median,
        "sentences_per_s": sentences / median,
        "round_trip": "".join(got) == text,
    }


def make(name: str, language: str) -> tuple[Segment, Callable[[str], list[str]] | None, str]:
    """The segmenter `name` for `language`: its segment function, its own offsets, and the language it uses."""
    if name == "sentencex":
        import sentencex

        def spans(text: str) -> list[str]:
            return [text[b["start_index"] : b["end_index"]] for b in sentencex.get_sentence_boundaries(language, text)]

        return (lambda text: list(sentencex.segment(language, text))), spans, language
    if name == "pysbd":
        import pysbd

        used = language if language in pysbd.languages.LANGUAGE_CODES else "sk"  # no Czech: its closest language
        segmenter = pysbd.Segmenter(language=used, clean=False, char_span=True)

        def pysbd_spans(text: str) -> list[str]:
            return [text[span.start : span.end] for span in segmenter.segment(text)]

        return (lambda text: [span.sent for span in segmenter.segment(text)]), pysbd_spans, used
    if name == "moses":
        from sentence_splitter import SentenceSplitter

        splitter = SentenceSplitter(language=language)
        return splitter.split, None, language
    raise ValueError(name)


def totals(per_language: dict[str, dict], languages: Sequence[str]) -> dict:
    rows = [per_language[language] for language in languages]
    n = sum(row["cases"] for row in rows)
    total = {"languages": list(languages), "cases": n, "exact": sum(row["exact"] for row in rows)}
    total["accuracy"] = total["exact"] / n
    for key in ("false_splits", "missed_splits", "expected_boundaries"):
        total[key] = sum(row[key] for row in rows)
    for key in ("round_trip", "located", "whitespace_changed", "text_changed"):
        total[key] = sum(row[key] * row["cases"] for row in rows) / n
    seconds = sum(row["speed"]["median_s"] for row in rows)
    total["sentences_per_s"] = sum(row["speed"]["sentences"] for row in rows) / seconds
    total["long_text_round_trip"] = all(row["speed"]["round_trip"] for row in rows)
    return total


def run(cases: Sequence[Case], runs: int) -> dict:
    results = {}
    for name in SEGMENTERS:
        per_language = {}
        for language in LANGUAGES:
            chosen = [case for case in cases if case.language == language]
            segment, spans, used = make(name, language)
            row = score(chosen, segment, spans)
            row = {"language_used": used, "supported": used == language, **row}
            row["speed"] = speed(segment, *long_text(chosen), runs)
            per_language[language] = row
            print(f"{name} {language}: {row['exact']}/{row['cases']}", file=sys.stderr)
        results[name] = {
            "package": PACKAGES[name],
            "version": version(PACKAGES[name]),
            "languages": per_language,
            "total": totals(per_language, LANGUAGES),
            "total_en_de_fr": totals(per_language, ("en", "de", "fr")),
        }
    return results


def table(results: dict) -> str:
    lines = [
        "| segmenter | en | de | fr | cs | all | false / missed splits | round trip | located | sentences/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, result in results.items():
        cells = []
        for language in LANGUAGES:
            row = result["languages"][language]
            note = "" if row["supported"] else f" ({row['language_used']} rules)"
            cells.append(f"{row['exact']}/{row['cases']}{note}")
        total = result["total"]
        lines.append(
            f"| {name} {result['version']} | {' | '.join(cells)} | {total['accuracy']:.1%} | "
            f"{total['false_splits']} / {total['missed_splits']} of {total['expected_boundaries']} | "
            f"{total['round_trip']:.0%} | {total['located']:.0%} | {total['sentences_per_s']:,.0f} |"
        )
    return "\n".join(lines)


def host() -> dict:
    from benchmarks.common.host import describe  # imports torch: not needed by score() and the tests

    return {**describe(), "processor": platform.processor(), "machine": platform.machine()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/segmenters.json"))
    parser.add_argument("--cases", type=Path, default=CASES)
    parser.add_argument("--runs", type=int, default=5, help="timed runs per segmenter and language (the median)")
    args = parser.parse_args(argv)
    cases = read_cases(args.cases)
    results = run(cases, args.runs)
    report = {
        "date": date.today().isoformat(),
        "command": " ".join(["python -m benchmarks.quality.segmenters", *(sys.argv[1:] if argv is None else argv)]),
        "host": host(),
        "versions": {name: version(package) for name, package in PACKAGES.items()},
        "cases": {language: sum(case.language == language for case in cases) for language in LANGUAGES},
        "segmenters": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(results))


if __name__ == "__main__":
    main()
