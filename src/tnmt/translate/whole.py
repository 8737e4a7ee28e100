"""A text's translation from its segments' (translate/segment.py): one `Translation` over the whole text.

The segments are translated as separate sentences, and everything a translation carries is put back over the
whole text, so that a client indexes the text it sent and the text it got, never a segment:

- text: the segments' translations with the source's own characters between them (`Layout.join`);
- evidence: alignment pairs and word probabilities offset to the whole text's whitespace words, the words
  copied between segments (a list marker) aligned to themselves with probability 1; the text's confidence is
  the geometric mean of all its tokens' probabilities (each segment's weighted by its tokens, EOS included), as a
  sentence's is; warnings are every segment's, with `sentence_split` when a sentence was translated in parts;
- constraints: each segment's reports, their words offset the same way;
- alternatives: the k-th alternative of a text joins the k-th of each segment (its last when it has fewer), as
  LibreTranslate (argos-translate) combines them; its score is the sum of theirs;
- sentences: per sentence, where it is in the text and in the translation, its confidence, and where it was cut.

The attention maps of one sentence cannot be joined with another's: a text of one segment keeps its maps, and a
caller who wants another sentence's asks for that sentence (the server's `sentence` field).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tnmt.translate.evidence import WARNINGS, Evidence
from tnmt.translate.prepared import Prepared
from tnmt.translate.segment import Layout
from tnmt.translate.steering import Steering
from tnmt.translate.translation import SentenceSpan, Translation


@dataclass(frozen=True)
class Split:
    """Texts cut into segments and each segment prepared, in order (`prepared`), with what joins them back.

    `layouts` is None when segmentation is off: each text is then one segment as given, and its translation is
    the segment's, untouched."""

    layouts: list[Layout] | None
    prepared: list[Prepared]

    def joined(self, results: Sequence[Translation]) -> list[Translation]:
        """Each text's translation from its segments' `results` (in `prepared`'s order)."""
        return list(results) if self.layouts is None else join_texts(self.layouts, results)

    def locate(self, text: int, sentence: int) -> int:
        """The index in `prepared` of text `text`'s sentence `sentence` (its first part when it was cut).

        Raises:
            IndexError: the text has no such sentence (the message says how many it has).
        """
        if self.layouts is None:
            if sentence != 0:
                raise IndexError(f"sentence {sentence}: segmentation is off, the text is one sentence (0)")
            return text
        layout = self.layouts[text]
        n = len(layout.parts)
        if not 0 <= sentence < n:
            raise IndexError(f"sentence {sentence}: the text has {n} sentence{'s' * (n != 1)} (0 to {n - 1})")
        return sum(len(other.spans) for other in self.layouts[:text]) + layout.sentence.index(sentence)


def join_texts(layouts: Sequence[Layout], results: Sequence[Translation]) -> list[Translation]:
    """Each text's translation from its segments' `results` (all the texts' segments, in order)."""
    texts, at = [], 0
    for layout in layouts:
        texts.append(joined(layout, results[at : at + len(layout.spans)]))
        at += len(layout.spans)
    return texts


def segment_steering(steering: Steering | None, index: int) -> Steering | None:
    """What a text's steering asks of its segment `index`: the glossary, kept terms and avoided phrases apply
    wherever they occur; the prefix and the phrases to include are asked of the first segment only (the text
    starts with the prefix, and contains each phrase once)."""
    if steering is None or index == 0:
        return steering
    return replace(steering, include=(), prefix="")


def joined(layout: Layout, results: Sequence[Translation]) -> Translation:
    """One text's translation from its segments' (the module docstring says how each part is joined)."""
    if len(results) != len(layout.spans):
        raise ValueError(f"{len(results)} translations for {len(layout.spans)} segments")
    text = layout.join([r.text for r in results])
    places = word_places(layout, results)
    n_best = max((len(r.nbest) for r in results), default=1)
    alternatives = tuple(
        Translation(
            layout.join([r.nbest[min(k, len(r.nbest) - 1)].text for r in results]),
            [t for r in results for t in r.nbest[min(k, len(r.nbest) - 1)].tokens],
            sum(r.nbest[min(k, len(r.nbest) - 1)].score for r in results),
            sum(r.nbest[min(k, len(r.nbest) - 1)].log_prob for r in results),
        )
        for k in range(1, n_best)
    )
    constraints = tuple(
        replace(report, words=tuple(offset + w for w in report.words))
        for r, (_, offset) in zip(results, places, strict=True)
        for report in r.constraints
    )
    return Translation(
        text,
        [t for r in results for t in r.tokens],
        sum(r.score for r in results),
        sum(r.log_prob for r in results),
        alternatives=alternatives,
        attention=results[0].attention if len(results) == 1 else None,
        evidence=_evidence(layout, results, places, text),
        constraints=constraints,
        token_log_probs=tuple(p for r in results for p in r.token_log_probs),
        sentences=_sentences(layout, results),
    )


def word_places(layout: Layout, results: Sequence[Translation]) -> list[tuple[int, int]]:
    """Each segment's first word: (in the source text, in the joined translation), over whitespace words."""
    places, source_at, target_at = [], 0, 0
    for gap, (start, end), r in zip(layout.gaps(), layout.spans, results, strict=False):
        source_at += len(gap.split())
        target_at += len(gap.split())
        places.append((source_at, target_at))
        source_at += len(layout.text[start:end].split())
        target_at += len(r.text.split())
    return places


def _evidence(
    layout: Layout, results: Sequence[Translation], places: list[tuple[int, int]], text: str
) -> Evidence | None:
    """The segments' evidence over the whole text and translation (None when a segment has none)."""
    if any(r.evidence is None for r in results):
        return None
    n_target = len(text.split())
    probs = [1.0] * n_target
    alignment: list[tuple[int, int]] = []
    for r, (source_at, target_at) in zip(results, places, strict=True):
        alignment += [(source_at + i, target_at + j) for i, j in r.evidence.alignment]
        probs[target_at : target_at + len(r.evidence.word_probs)] = r.evidence.word_probs
    # the words between segments (list markers) are copied: each aligned to itself, the gap's words ending where
    # the next segment's start (the last gap's, where the text and the translation end)
    ends = [*places, (len(layout.text.split()), n_target)]
    for gap, (source_end, target_end) in zip(layout.gaps(), ends, strict=True):
        copied = len(gap.split())
        alignment += [(source_end - copied + k, target_end - copied + k) for k in range(copied)]
    warnings = {w for r in results for w in r.evidence.warnings}
    if len(layout.parts) < len(layout.spans):
        warnings.add("sentence_split")
    return Evidence(
        sorted(set(alignment)), probs[:n_target], _confidence(results), [w for w in WARNINGS if w in warnings]
    )


def _confidence(results: Sequence[Translation]) -> float:
    """The geometric mean of the segments' token probabilities: each segment's confidence weighted by its tokens
    and EOS (1.0 when no segment was decoded)."""
    weighted = [(len(r.tokens) + 1, r.evidence.confidence) for r in results if r.tokens and r.evidence is not None]
    total = sum(n for n, _ in weighted)
    if not total:
        return 1.0
    return math.exp(sum(n * math.log(max(c, 1e-300)) for n, c in weighted) / total)


def _sentences(layout: Layout, results: Sequence[Translation]) -> tuple[SentenceSpan, ...]:
    """Per sentence: its characters in the text and in the translation, its confidence, and the source offsets
    where it was cut into parts (empty when it was translated whole)."""
    gaps = layout.gaps()
    target_spans, at = [], 0
    for gap, r in zip(gaps, results, strict=False):
        at += len(gap)
        target_spans.append((at, at + len(r.text)))
        at += len(r.text)
    sentences = []
    for s, source in enumerate(layout.sentence_spans):
        members = [i for i, owner in enumerate(layout.sentence) if owner == s]
        first, last = members[0], members[-1]
        sentences.append(
            SentenceSpan(
                source=source,
                target=(target_spans[first][0], target_spans[last][1]),
                confidence=_confidence([results[i] for i in members]),
                cuts=tuple(layout.spans[i][0] for i in members[1:]),
                attention=results[first].attention if len(members) == 1 else None,
            )
        )
    return tuple(sentences)
