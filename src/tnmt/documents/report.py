"""What a translated document's reader should check first: one entry per segment (a unit of the document: a
paragraph or its sentence, a cue, a message) with the evidence of its translation.

A document is read by people who did not see the model work; the report tells them where to look. Each segment
carries its confidence (translate/evidence.py: the geometric mean of its tokens' probabilities), its warnings,
the glossary terms it was asked to use and whether each was met, the strings kept as written (placeholders) and
whether a sentence of it was too long and translated in parts. `lowest` orders them as a reviewer would read
them: the least confident first.
"""

from collections import Counter
from collections.abc import Sequence
from typing import Any

from tnmt.documents.units import Unit
from tnmt.translate.translation import Translation


def segment_report(units: list[Unit], found: list[Translation], left: Sequence[str] = ()) -> dict[str, Any]:
    """The report of a document whose `units` were translated as `found` (one translation per unit, in order):
    `segments` in document order, `left` (each piece with words not translated, with why: never silent; the
    reader's, then each segment that came back as it was), and a `summary` (counts, the mean and lowest
    confidence, warnings by code)."""
    segments = [_segment(k, u, t) for k, (u, t) in enumerate(zip(units, found, strict=True))]
    left = [*left, *(line for k, (u, t) in enumerate(zip(units, found, strict=True)) if (line := _unchanged(k, u, t)))]
    confidences = [s["confidence"] for s in segments]
    warnings: Counter[str] = Counter(code for s in segments for code in s["warnings"])
    return {
        "segments": segments,
        "left": list(left),
        "summary": {
            "segments": len(segments),
            "mean_confidence": round(sum(confidences) / len(confidences), 4) if confidences else None,
            "lowest_confidence": min(confidences) if confidences else None,
            "warnings": dict(sorted(warnings.items())),
            "split": sum(s["split"] for s in segments),
            "terms_missed": sum(not term["met"] for s in segments for term in s["terms"]),
            "left": len(left),
        },
    }


def lowest(report: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The report's `n` least confident segments, the least first (document order among equals)."""
    return sorted(report["segments"], key=lambda s: (s["confidence"], s["index"]))[:n]


def _unchanged(index: int, unit: Unit, found: Translation) -> str | None:
    """Why segment `index` came back as it was, when it has words and did: the model read nothing of it but
    strings kept as written (a URL, an e-mail address, a placeholder), or it wrote the words back itself."""
    if found.text.strip() != unit.text.strip() or not any(ch.isalpha() for ch in unit.text):
        return None
    why = "the model wrote it back as it was" if found.tokens else "only strings kept as written (a URL, an address)"
    shown = unit.text if len(unit.text) <= 40 else unit.text[:39] + "…"
    return f"segment {index} ({shown!r}): came back as it was: {why}"


def _segment(index: int, unit: Unit, found: Translation) -> dict[str, Any]:
    evidence = found.evidence
    return {
        "index": index,
        "source": unit.text,
        "translation": found.text,
        "confidence": round(evidence.confidence, 4) if evidence else None,
        "warnings": list(evidence.warnings) if evidence else [],
        "terms": [
            {"term": c.target, "met": c.met, "form": c.form} for c in found.constraints if c.source == "glossary"
        ],
        "kept": list(unit.keep),
        "sentences": max(1, len(found.sentences)),
        "split": bool(evidence and "sentence_split" in evidence.warnings),
    }
