"""What a glossary term replaces: the model's own word for the term's source, learned from the model itself.

A glossary entry "girl -> Mädel" asks for "Mädel" where the model would write "Mädchen". Required alone, the term
joins the model's word instead of replacing it ("Ein junges Mädchen Mädel springt über eine Pfütze."): a quarter of
the sentences of a synonym glossary on Multi30k (benchmarks/quality/synonyms.py). So before the constrained search,
`plain_passes` runs the same sentences through a plain search (the same settings) and one teacher-forced pass
through the aligning layer over the best translations. The words that may be a term's are those that read its
source hardest and each source word's hardest reader (`candidate_places`: the two reads of the evidence's
alignment); where there are several ("Ein Kind" both read "Child"), the model scores the translation with the term
in each one's place, and the best place names the word the term replaces. `replacing` makes it the constraint's
`replaced` phrases (decode/constraints.py), banned in every spelling a writer would use (translate/phrases.py's
`spellings`) and in the inflections the vocabulary holds as one piece (`Inflections`: "Kindern" for "Kinder"), so
the search writes the term in its place; `swaps` is the plain translation with the terms in their places, which
translate/term_search.py weighs against what the search found.

Not banned, so that a ban never takes a word the sentence needs elsewhere or blocks the term: a word the plain
translation also writes for a source word outside every term (`_shared`), and a spelling inside a form of a term.

The same plain pass checks the result (`term_checks`): does the steered translation still hold the model's word
(`doubled`), and which source words near the term lost their translation (`lost`: "in a red dress" dropped to make
room for the term): a word the steered translation aligns to nothing, whose translation in the plain one (a word of
`CONTENT_LETTERS` letters or more: function words move between translations) is gone from the text.
"""

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import torch

from tnmt.aligning_head import alignment_rows
from tnmt.config import DecodeConfig
from tnmt.decode.hypothesis import Hypothesis
from tnmt.model import EncodedSource
from tnmt.translate.door import ModelDoor
from tnmt.translate.evidence import REVERSE_MIN, Evidence, piece_words, target_word_attention, word_alignment
from tnmt.translate.inflections import Inflections, spells_inflected
from tnmt.translate.phrases import spellings
from tnmt.translate.prepared import Prepared, Source
from tnmt.translate.steering import SteeringTokenizer

NEAR_WORDS = 3  # source words either side of a term whose translation `lost` watches
CONTENT_LETTERS = 4  # a plain translation's word this long is a content word whose loss `lost` reports
MAX_SWAPS = 4  # plain translations with the terms swapped in that the search's result is compared with
_LETTER = re.compile(r"[^\W\d_]")
_PUNCTUATION = ".,;:!?\"'()[]{}«»“”„…-"


@dataclass(frozen=True)
class PlainPass:
    """One sentence's plain translation, as the terms of its glossary read it.

    own: per positive constraint, the model's own words for its source (empty for a phrase to include).
    rendered: the content words the plain best translation aligns to each source word (of the text the model
        reads), casefolded.
    written: the other words (casefolded) of the plain best translation: the model's words in any case, which a
        steered translation that writes them does not double a term with.
    swaps: the plain best translation with each glossary term in the place of its own word (`swaps`).
    """

    own: tuple[tuple[str, ...], ...]
    rendered: dict[int, frozenset[str]]
    written: frozenset[str] = frozenset()
    swaps: tuple[str, ...] = ()

    def dropped(self, text: str, terms: Sequence[tuple[int, int] | None]) -> int:
        """How many source words outside the `terms` (word spans) have lost their translation in `text`: each of its
        content words in the plain translation is gone from it."""
        written = {bare_word(word).casefold() for word in text.split()}
        in_terms = {s for span in terms if span is not None for s in range(*span)}
        return sum(1 for s, words in self.rendered.items() if s not in in_terms and not words & written)


class Look(NamedTuple):
    """Where one output's words looked: its words, their aligning attention over the source words and EOS
    (`target_word_attention`), and its word alignment."""

    words: list[str]
    attention: np.ndarray
    alignment: list[tuple[int, int]]


def plain_passes(
    door: ModelDoor,
    batch: Sequence[Prepared],
    settings: DecodeConfig,
    tokenizer: SteeringTokenizer,
    *,
    aligning: int,
    encoded: EncodedSource | None = None,
) -> list[PlainPass | None]:
    """The plain pass of each text of `batch` that a glossary term applies to (`Plan.glossed`), None for the others:
    one search of those texts without their required phrases (their other steering kept), one teacher-forced pass
    through the aligning layer over the best translations, and, where a term's source is read hardest by several
    words ("Ein Kind" both read "Child"), one pass that scores the translation with the term in each one's place:
    the word whose place the model likes the term in best is the one it replaces. `encoded`: the batch's sources
    encoded already (row b text b; default: encoded now)."""
    chosen = [b for b, p in enumerate(batch) if p.source is not None and p.plan is not None and p.plan.glossed]
    passes: list[PlainPass | None] = [None] * len(batch)
    if not chosen:
        return passes
    plain = [replace(batch[b].plan.constraints, required=(), sources=(), replaced=()) for b in chosen]
    sources = [batch[b].source for b in chosen]
    rows = None if encoded is None else encoded.select(torch.tensor(chosen, device=door.device))
    encoded, found = door.search(sources, settings, constraints=plain, encoded=rows)
    have = [i for i, hypotheses in enumerate(found) if hypotheses[0].tokens]
    readers = [batch[chosen[i]] for i in have]
    outputs = [found[i][0].tokens for i in have]
    seen = dict(zip(have, looks_of(door, readers, outputs, encoded, have, settings, tokenizer, aligning), strict=True))
    options = {i: candidate_places(batch[chosen[i]], look) for i, look in seen.items()}
    places = {i: {c: js[0] for c, js in enumerate(per) if len(js) == 1} for i, per in options.items()}
    trials = [(i, c, j) for i, per in options.items() for c, js in enumerate(per) if len(js) > 1 for j in js]
    if trials:
        texts = [swapped(seen[i].words, {c: j}, batch[chosen[i]].plan.forms, 0) for i, c, j in trials]
        ids = [tokenizer.encode_target(text) or [door.eos_id] for text in texts]
        sources = [batch[chosen[i]].source for i, _, _ in trials]
        rows = encoded.select(torch.tensor([i for i, _, _ in trials], device=door.device))
        best: dict[tuple[int, int], tuple[float, int]] = {}
        for (i, c, j), hypothesis in zip(
            trials, scored(door, sources, ids, rows, settings.length_penalty), strict=True
        ):
            if (i, c) not in best or hypothesis.score > best[i, c][0]:
                best[i, c] = hypothesis.score, j
        for (i, c), (_, j) in best.items():
            places[i][c] = j
    for i, b in enumerate(chosen):
        n = len(batch[b].plan.term_words)
        if i not in seen:
            passes[b] = PlainPass(((),) * n, {})
            continue
        look, place = seen[i], places[i]
        shared = _shared(batch[b], look, set(place.values()))
        own = tuple(
            (word,) if c in place and (word := bare_word(look.words[place[c]])).casefold() not in shared else ()
            for c in range(n)
        )
        rendered: dict[int, frozenset[str]] = {}
        for s, j in look.alignment:
            if len(word := bare_word(look.words[j])) >= CONTENT_LETTERS:
                rendered[s] = rendered.get(s, frozenset()) | {word.casefold()}
        written = frozenset(bare_word(w).casefold() for j, w in enumerate(look.words) if j not in place.values())
        passes[b] = PlainPass(own, rendered, written, swaps(batch[b], look.words, place))
    return passes


def scored(
    door: ModelDoor, sources: Sequence[Source], outputs: Sequence[list[int]], encoded: EncodedSource, alpha: float
) -> list[Hypothesis]:
    """Each output (non-empty ids) as a finished hypothesis the model scores as a search does (`Hypothesis.scored`
    with length penalty `alpha`, EOS included), from one teacher-forced pass, output k read from `sources[k]`,
    encoded as row k of `encoded`."""
    forced = door.teacher_forced(sources, outputs, encoded=encoded, weights=False)
    log_probs = forced.logits.float().log_softmax(dim=-1)  # (N, T, V): row t predicts output token t, then EOS
    found = []
    for k, ids in enumerate(outputs):
        own = [
            *log_probs[k, torch.arange(len(ids)), torch.tensor(ids)].tolist(),
            float(log_probs[k, len(ids), door.eos_id]),
        ]
        found.append(Hypothesis.scored(ids, sum(own), ended=True, alpha=alpha, token_log_probs=tuple(own)))
    return found


def looks_of(
    door: ModelDoor,
    readers: Sequence[Prepared],
    outputs: Sequence[list[int]],
    encoded: EncodedSource,
    rows_of: Sequence[int],
    settings: DecodeConfig,
    tokenizer: SteeringTokenizer,
    aligning: int,
) -> list[Look]:
    """Where each output's words looked, from one teacher-forced pass through the aligning layer over `outputs`
    (non-empty ids), output k read from `readers[k]`'s source, row `rows_of[k]` of `encoded`."""
    if not outputs:
        return []
    index = torch.tensor(list(rows_of), device=door.device)
    sources = [p.source for p in readers]
    forced = door.teacher_forced(sources, outputs, encoded=encoded.select(index), layers=aligning + 1)
    rows = alignment_rows(forced.weights[aligning][1], settings.alignment_head).float().cpu()  # (N, T, S)
    looks, shift = [], settings.alignment_shift
    for k, (p, ids) in enumerate(zip(readers, outputs, strict=True)):
        text = tokenizer.decode_target(ids)
        source_words = piece_words(p.source.pieces, p.read)[: len(p.source.ids)]
        target_words = piece_words(tokenizer.target_pieces(ids), text)
        attention = target_word_attention(rows[k], source_words, target_words, shift=shift)
        looks.append(Look(text.split(), attention, word_alignment(rows[k], source_words, target_words, shift=shift)))
    return looks


def replacing(
    prepared: Prepared, plain: PlainPass | None, tokenizer: SteeringTokenizer, inflections: Inflections | None
) -> Prepared:
    """`prepared` with each glossary constraint's `replaced` phrases: the plain pass's own words for its source, in
    every spelling to ban and as the inflected pieces of the target vocabulary (`inflections`), less those inside
    a form of any of the sentence's constraints."""
    if plain is None or not any(plain.own):
        return prepared
    constraints = prepared.plan.constraints
    forms = [form for phrase in constraints.required for form in phrase]
    replaced = tuple(
        tuple(
            dict.fromkeys(
                ids
                for word in words
                for ids in [*spellings(word, tokenizer), *(inflections.of(word) if inflections else ())]
                if not any(_inside(form, ids) for form in forms)
            )
        )
        for words in plain.own
    )
    return replace(prepared, plan=replace(prepared.plan, constraints=replace(constraints, replaced=replaced)))


def term_checks(
    prepared: Prepared, plain: PlainPass, text: str, evidence: Evidence | None, met: Sequence[Sequence[int]]
) -> list[tuple[bool, tuple[str, ...]]]:
    """Per positive constraint of `prepared`: is its term doubled in the translation `text` (one of the model's own
    words for its source is there too, outside the words `met` that meet it, and not a word the plain translation
    writes for something else), and which source words near it lost
    their translation (aligned in the plain translation, not by `evidence`'s alignment of this one: none without
    it). A `steering.TermChecks` once `prepared` and `plain` are given."""
    words = [bare_word(word) for word in text.split()]
    written = {word.casefold() for word in words}
    aligned = {s for s, _ in evidence.alignment} if evidence is not None else None
    read_words = prepared.read.split()
    checks = []
    for own, span, at in zip(plain.own, prepared.plan.term_words, met, strict=True):
        doubled = any(
            spells_inflected(w, own) for j, w in enumerate(words) if j not in at and w.casefold() not in plain.written
        )
        lost: tuple[str, ...] = ()
        if span is not None and aligned is not None:
            near = [*range(max(span[0] - NEAR_WORDS, 0), span[0]), *range(span[1], span[1] + NEAR_WORDS)]
            gone = [s for s in near if s in plain.rendered and s not in aligned and not plain.rendered[s] & written]
            lost = tuple(read_words[s] for s in gone)
        checks.append((doubled, lost))
    return checks


def candidate_places(prepared: Prepared, look: Look, *, skip: Collection[int] = ()) -> list[list[int]]:
    """Per positive constraint, the words of an output (`look`) that may be the model's own for its term's source:
    those with letters that read the source hardest, and each source word's hardest reader (the two reads of the
    evidence's alignment), less those in `skip` and those that spell a form of the term. Empty for a phrase to
    include."""
    spans, forms = prepared.plan.term_words, prepared.plan.forms
    n_source = look.attention.shape[1] - 1
    words = [bare_word(look.words[j]) if j < len(look.words) else "" for j in range(look.attention.shape[0])]
    usable = [bool(_LETTER.search(word)) and j not in skip for j, word in enumerate(words)]
    strongest = look.attention[:, :n_source].argmax(axis=0)  # (source words,) each one's strongest target word
    reads = look.attention.argmax(axis=1).tolist()  # (target words,) the source word each reads hardest
    places = []
    for c, span in enumerate(spans):
        found: set[int] = set()
        for s in range(*span) if span is not None else ():
            if look.attention[j := int(strongest[s]), s] >= REVERSE_MIN:
                found.add(j)
            found |= {j for j, read in enumerate(reads) if read == s}
        terms = {form.casefold() for form in forms[c]}
        places.append(sorted(j for j in found if usable[j] and words[j].casefold() not in terms))
    return places


def _shared(prepared: Prepared, look: Look, places: Collection[int]) -> frozenset[str]:
    """The words (casefolded) an output writes, outside `places`, for a source word outside every term: a term's own
    word among them is the model's word for something else too, which a ban would take there."""
    in_terms = {s for span in prepared.plan.term_words if span is not None for s in range(*span)}
    n_source = look.attention.shape[1] - 1
    return frozenset(
        bare_word(look.words[j]).casefold()
        for j, s in enumerate(look.attention.argmax(axis=1).tolist())
        if j < len(look.words) and s != n_source and s not in in_terms and j not in places
    )


def swaps(prepared: Prepared, words: Sequence[str], place: dict[int, int]) -> tuple[str, ...]:
    """An output's `words` with each glossary term at its `place` (constraint -> word), one text per form (a term
    with fewer forms keeps its last), at most `MAX_SWAPS`; () unless every term has its place."""
    terms = [c for c, span in enumerate(prepared.plan.term_words) if span is not None]
    if not terms or any(c not in place for c in terms) or len(set(place.values())) < len(place):
        return ()
    forms = prepared.plan.forms
    n = min(MAX_SWAPS, max(len(forms[c]) for c in terms))
    return tuple(dict.fromkeys(swapped(words, place, forms, f) for f in range(n)))


def swapped(words: Sequence[str], place: dict[int, int], forms: Sequence[Sequence[str]], f: int) -> str:
    """`words` with each constraint's `f`-th form (its last if it has fewer) at its place, the punctuation around
    the word it takes kept."""
    out = list(words)
    for c, j in place.items():
        word = out[j]
        lead, trail = word[: len(word) - len(word.lstrip(_PUNCTUATION))], word[len(word.rstrip(_PUNCTUATION)) :]
        out[j] = lead + forms[c][min(f, len(forms[c]) - 1)] + trail
    return " ".join(out)


def bare_word(word: str) -> str:
    """A word without the punctuation around it."""
    return word.strip(_PUNCTUATION)


def _inside(form: tuple[int, ...], ids: tuple[int, ...]) -> bool:
    n = len(ids)
    return any(form[i : i + n] == ids for i in range(len(form) - n + 1))
