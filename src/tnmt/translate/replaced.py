"""What a glossary term replaces: the model's own words for the term's source, learned from the model itself.

A glossary entry "girl -> Mädel" asks for "Mädel" where the model would write "Mädchen". Required alone, the term
joins the model's word instead of replacing it ("Ein junges Mädchen Mädel springt über eine Pfütze."): a quarter of
the sentences of a synonym glossary on Multi30k (benchmarks/quality/synonyms.py). So before the constrained search,
`plain_passes` runs the same sentences through a plain search (the same settings, its `OWN_HYPOTHESES` best) and
one teacher-forced pass through the aligning layer over those outputs; a target word whose strongest aligning
attention is on a term's source words is the model's own word for it. `replacing` makes those words the
constraint's `replaced` phrases (decode/constraints.py), banned in every spelling a writer would use
(translate/steering.py's `spellings`) and in their inflections that the vocabulary holds as one piece ("Kindern"
for "Kinder"), so the search writes the term in their place.

Not banned, so that a ban never takes a word the sentence needs elsewhere or blocks the term:
- a word the plain translation also writes for a source word outside every term ("ein" for "a" and for "girl");
- a word without letters, one that spells a form of the term, and a spelling inside a form (the term's own
  subwords).

The same plain pass checks the result (`term_checks`): does the steered translation still hold one of those words
(`doubled`), and which source words near the term lost their translation (`lost`: "in a red dress" dropped to
make room for the term): a word the steered translation aligns to nothing, whose translation in the plain one (a
word of `CONTENT_LETTERS` letters or more: function words move between translations) is gone from the text.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from tnmt.aligning_head import alignment_rows
from tnmt.config import DecodeConfig
from tnmt.data.tokenizer import starts_word
from tnmt.translate.door import ModelDoor
from tnmt.translate.evidence import Evidence, piece_words, target_word_attention, word_alignment
from tnmt.translate.prepared import Prepared
from tnmt.translate.steering import SteeringTokenizer, spellings

OWN_HYPOTHESES = 4  # the plain search's best hypotheses whose words for a term are the model's own
NEAR_WORDS = 3  # source words either side of a term whose translation `lost` watches
INFLECTION = 2  # letters a word may add to one of the model's own words and still be that word ("Mädchens")
CONTENT_LETTERS = 4  # a plain translation's word this long is a content word whose loss `lost` reports
_LETTER = re.compile(r"[^\W\d_]")
_PUNCTUATION = ".,;:!?\"'()[]{}«»“”„…-"


@dataclass(frozen=True)
class PlainPass:
    """One sentence's plain translation, as the terms of its glossary read it.

    own: per positive constraint, the model's own words for its source (empty for a phrase to include).
    rendered: the content words the plain best translation aligns to each source word (of the text the model
        reads), casefolded.
    """

    own: tuple[tuple[str, ...], ...]
    rendered: dict[int, frozenset[str]]


def plain_passes(
    door: ModelDoor,
    batch: Sequence[Prepared],
    settings: DecodeConfig,
    tokenizer: SteeringTokenizer,
    *,
    aligning: int,
) -> list[PlainPass | None]:
    """The plain pass of each text of `batch` that a glossary term applies to (`Plan.glossed`), None for the others:
    one search of those texts without their required phrases (their other steering kept), and one teacher-forced
    pass through the aligning layer (`aligning`) over its best hypotheses."""
    chosen = [b for b, p in enumerate(batch) if p.source is not None and p.plan is not None and p.plan.glossed]
    passes: list[PlainPass | None] = [None] * len(batch)
    if not chosen:
        return passes
    plain = [replace(batch[b].plan.constraints, required=(), sources=(), replaced=()) for b in chosen]
    sources = [batch[b].source for b in chosen]
    n_best = min(settings.beam_size, OWN_HYPOTHESES)
    encoded, found = door.search(sources, settings, n_best=n_best, constraints=plain)
    which = [i for i, hypotheses in enumerate(found) for h in hypotheses if h.tokens]  # (N,) each output's sentence
    outputs = [h.tokens for hypotheses in found for h in hypotheses if h.tokens]
    reads: list[list[tuple[list[int], str]]] = [[] for _ in chosen]  # per sentence: (ids, text) of its outputs
    for i, ids in zip(which, outputs, strict=True):
        reads[i].append((ids, tokenizer.decode_target(ids)))
    rows = None
    if outputs:
        index = torch.tensor(which, device=door.device)
        forced = door.teacher_forced(
            [sources[i] for i in which], outputs, encoded=encoded.select(index), layers=aligning + 1
        )
        rows = alignment_rows(forced.weights[aligning][1], settings.alignment_head).float().cpu()  # (N, T, S)
    n = 0
    for i, b in enumerate(chosen):
        p = batch[b]
        source_words = piece_words(p.source.pieces, p.read)[: len(p.source.ids)]
        looks, rendered = [], {}
        for k, (ids, text) in enumerate(reads[i]):
            target_words, words = piece_words(tokenizer.target_pieces(ids), text), text.split()
            shift = settings.alignment_shift
            looks.append((words, target_word_attention(rows[n], source_words, target_words, shift=shift)))
            if k == 0:
                for s, j in word_alignment(rows[n], source_words, target_words, shift=shift):
                    if len(word := _bare(words[j])) >= CONTENT_LETTERS:
                        rendered[s] = rendered.get(s, frozenset()) | {word.casefold()}
            n += 1
        passes[b] = PlainPass(_own_words(p, looks), rendered)
    return passes


def replacing(
    prepared: Prepared, plain: PlainPass | None, tokenizer: SteeringTokenizer, pieces: Sequence[str]
) -> Prepared:
    """`prepared` with each glossary constraint's `replaced` phrases: the plain pass's own words for its source, in
    every spelling to ban and as the inflected pieces of the target vocabulary `pieces` (by id), less those inside
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
                for ids in [*spellings(word, tokenizer), *_inflected(word, pieces)]
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
    words for its source is there too, outside the words `met` that meet it), and which source words near it lost
    their translation (aligned in the plain translation, not by `evidence`'s alignment of this one: none without
    it). A `steering.TermChecks` once `prepared` and `plain` are given."""
    words = [_bare(word) for word in text.split()]
    written = {word.casefold() for word in words}
    aligned = {s for s, _ in evidence.alignment} if evidence is not None else None
    read_words = prepared.read.split()
    checks = []
    for own, span, at in zip(plain.own, prepared.plan.term_words, met, strict=True):
        doubled = any(_spells(word, own) for j, word in enumerate(words) if j not in at)
        lost: tuple[str, ...] = ()
        if span is not None and aligned is not None:
            near = [*range(max(span[0] - NEAR_WORDS, 0), span[0]), *range(span[1], span[1] + NEAR_WORDS)]
            gone = [s for s in near if s in plain.rendered and s not in aligned and not plain.rendered[s] & written]
            lost = tuple(read_words[s] for s in gone)
        checks.append((doubled, lost))
    return checks


def _own_words(prepared: Prepared, looks: Sequence[tuple[list[str], object]]) -> tuple[tuple[str, ...], ...]:
    """Per positive constraint, the words of the plain outputs (`looks`: each output's words and their attention
    over the source words, `target_word_attention`) that look hardest at its term's source words, less those the
    module docstring keeps."""
    plan = prepared.plan
    spans = plan.term_words
    in_terms = {s for span in spans if span is not None for s in range(*span)}
    own: list[dict[str, None]] = [{} for _ in spans]
    elsewhere: set[str] = set()  # words the best output writes for a source word outside every term
    for k, (words, attention) in enumerate(looks):
        n_source = attention.shape[1] - 1
        for j, s in enumerate(attention.argmax(axis=1).tolist()):
            word = _bare(words[j]) if j < len(words) else ""
            if not _LETTER.search(word) or s == n_source:
                continue
            if s not in in_terms and k == 0:
                elsewhere.add(word.casefold())
            for c, span in enumerate(spans):
                if span is not None and span[0] <= s < span[1]:
                    own[c][word] = None
    return tuple(
        tuple(
            w
            for w in found
            if w.casefold() not in elsewhere and not any(w.casefold() == f.casefold() for f in plan.forms[c])
        )
        for c, found in enumerate(own)
    )


def _bare(word: str) -> str:
    """A word without the punctuation around it."""
    return word.strip(_PUNCTUATION)


def _spells(word: str, own: Sequence[str]) -> bool:
    """Is `word` one of `own`, or one of them with an inflection ending (case ignored)?"""
    folded = word.casefold()
    return any(folded.startswith(w.casefold()) and len(folded) - len(w) <= INFLECTION for w in own)


def _inflected(word: str, pieces: Sequence[str]) -> list[tuple[int, ...]]:
    """The ids of the word-starting pieces that spell `word` with an inflection ending (`_spells`), either case."""
    return [
        (i,)
        for i, piece in enumerate(pieces)
        if starts_word(piece) and len(piece) - 1 > len(word) and _spells(piece[1:], (word,))
    ]


def _inside(form: tuple[int, ...], ids: tuple[int, ...]) -> bool:
    n = len(ids)
    return any(form[i : i + n] == ids for i in range(len(form) - n + 1))
