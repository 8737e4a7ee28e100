"""What a glossary term replaces: the model's own words for the term's source, learned from the model itself.

A glossary entry "girl -> Mädel" asks for "Mädel" where the model would write "Mädchen". Required alone, the term
joins the model's word instead of replacing it ("Ein junges Mädchen Mädel springt über eine Pfütze."): a quarter of
the sentences of a synonym glossary on Multi30k (benchmarks/quality/synonyms.py). So before the constrained search,
`plain_passes` runs the same sentences through a plain search (the same settings, its `OWN_HYPOTHESES` best) and
one teacher-forced pass through the aligning layer over those outputs; a target word whose strongest aligning
attention is on a term's source words, or the target word that attends to a term's source word hardest (the two
reads of the evidence's alignment), is the model's own word for it. `replacing` makes those words the
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
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import torch

from tnmt.aligning_head import alignment_rows
from tnmt.config import DecodeConfig
from tnmt.data.tokenizer import starts_word
from tnmt.decode.hypothesis import Hypothesis
from tnmt.model import EncodedSource
from tnmt.translate.door import ModelDoor
from tnmt.translate.evidence import REVERSE_MIN, Evidence, piece_words, target_word_attention, word_alignment
from tnmt.translate.prepared import Prepared
from tnmt.translate.steering import SteeringTokenizer, spellings

OWN_HYPOTHESES = 4  # the plain search's best hypotheses whose words for a term are the model's own
NEAR_WORDS = 3  # source words either side of a term whose translation `lost` watches
INFLECTION = 2  # letters a word may add to one of the model's own words and still be that word ("Mädchens")
STEM_LETTERS = 4  # the shorter of two spellings `_spells` takes for one word has at least this many letters
CONTENT_LETTERS = 4  # a plain translation's word this long is a content word whose loss `lost` reports
_LETTER = re.compile(r"[^\W\d_]")
_PUNCTUATION = ".,;:!?\"'()[]{}«»“”„…-"


@dataclass(frozen=True)
class PlainPass:
    """One sentence's plain translation, as the terms of its glossary read it.

    own: per positive constraint, the model's own words for its source (empty for a phrase to include).
    rendered: the content words the plain best translation aligns to each source word (of the text the model
        reads), casefolded.
    elsewhere: the words (casefolded) the plain best translation writes for a source word outside every term.
    """

    own: tuple[tuple[str, ...], ...]
    rendered: dict[int, frozenset[str]]
    elsewhere: frozenset[str] = frozenset()


class _Look(NamedTuple):
    """Where one output's words looked: its words, their aligning attention over the source words and EOS
    (`target_word_attention`), and its word alignment."""

    words: list[str]
    attention: np.ndarray
    alignment: list[tuple[int, int]]


def search_replacing(
    door: ModelDoor,
    batch: Sequence[Prepared],
    settings: DecodeConfig,
    tokenizer: SteeringTokenizer,
    inflections: "Inflections | None",
    *,
    aligning: int,
    n_best: int = 1,
    encoder_attention: bool = False,
) -> tuple[EncodedSource, list[list[Hypothesis]], list[Prepared], list[PlainPass | None]]:
    """`door.search` of a batch under its steering, each glossary term replacing the model's own words for its
    source: a plain pass learns them (`plain_passes`), the search bans them (`replacing`), and a sentence is
    searched once more (`_second_round`) when its best translation still writes a word for a term's source beside
    the term (a second synonym: "Kids" where "Kinder" was banned; that word is banned too) or leaves a term out (its
    attention never came near the term's source, or a second occurrence of the term went unwritten: the terms are
    then offered wherever the search is); its result is kept unless it meets fewer terms. Returns the search's
    encoded sources and hypotheses, the texts as searched, and their plain passes (None where no glossary term
    applies), whose own words the checks of the result read (`term_checks`)."""
    plain = plain_passes(door, batch, settings, tokenizer, aligning=aligning)
    searched = [replacing(p, one, tokenizer, inflections) for p, one in zip(batch, plain, strict=True)]
    steered = any(p.steers for p in batch)
    constraints = [p.plan.constraints for p in searched] if steered else None
    sources = [p.source for p in searched]
    encoded, found = door.search(
        sources, settings, n_best=n_best, constraints=constraints, encoder_attention=encoder_attention
    )
    again = _second_round(door, searched, plain, found, encoded, settings, tokenizer, aligning)
    if again:
        for b, (one, anywhere) in again.items():
            plain[b], searched[b] = one, replacing(batch[b], one, tokenizer, inflections)
            if anywhere:  # each term offered at every step, wherever the attention is
                plan = searched[b].plan
                searched[b] = replace(
                    searched[b], plan=replace(plan, constraints=replace(plan.constraints, sources=()))
                )
        chosen = sorted(again)
        _, refound = door.search(
            [sources[b] for b in chosen],
            settings,
            n_best=n_best,
            constraints=[searched[b].plan.constraints for b in chosen],
        )
        for b, hypotheses in zip(chosen, refound, strict=True):
            if hypotheses and hypotheses[0].met >= found[b][0].met:  # a second search that meets fewer terms loses
                found[b] = hypotheses
    return encoded, found, searched, plain


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
    n_best = min(settings.beam_size, OWN_HYPOTHESES)
    encoded, found = door.search([batch[b].source for b in chosen], settings, n_best=n_best, constraints=plain)
    which = [i for i, hypotheses in enumerate(found) for h in hypotheses if h.tokens]  # (N,) each output's sentence
    outputs = [h.tokens for hypotheses in found for h in hypotheses if h.tokens]
    looks: list[list[_Look]] = [[] for _ in chosen]
    readers = [batch[chosen[i]] for i in which]
    for i, look in zip(
        which, _looks(door, readers, outputs, encoded, which, settings, tokenizer, aligning), strict=True
    ):
        looks[i].append(look)
    for i, b in enumerate(chosen):
        rendered: dict[int, frozenset[str]] = {}
        for s, j in looks[i][0].alignment if looks[i] else ():
            if len(word := _bare(looks[i][0].words[j])) >= CONTENT_LETTERS:
                rendered[s] = rendered.get(s, frozenset()) | {word.casefold()}
        own, elsewhere = _own_words(batch[b], looks[i])
        passes[b] = PlainPass(own, rendered, elsewhere)
    return passes


def _looks(
    door: ModelDoor,
    readers: Sequence[Prepared],
    outputs: Sequence[list[int]],
    encoded: EncodedSource,
    rows_of: Sequence[int],
    settings: DecodeConfig,
    tokenizer: SteeringTokenizer,
    aligning: int,
) -> list[_Look]:
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
        looks.append(_Look(text.split(), attention, word_alignment(rows[k], source_words, target_words, shift=shift)))
    return looks


def _second_round(
    door: ModelDoor,
    searched: Sequence[Prepared],
    plain: Sequence[PlainPass | None],
    found: Sequence[Sequence[Hypothesis]],
    encoded: EncodedSource,
    settings: DecodeConfig,
    tokenizer: SteeringTokenizer,
    aligning: int,
) -> dict[int, tuple[PlainPass, bool]]:
    """The sentences to search again (`search_replacing`): their plain passes, the own words grown by those that
    their best steered translation writes for a term's source outside the words that meet a term (a word the plain
    pass left out, nor written elsewhere), and whether a glossary term of theirs went unmet."""
    chosen = [b for b, one in enumerate(plain) if one is not None and found[b] and found[b][0].tokens]
    looks = _looks(
        door,
        [searched[b] for b in chosen],
        [found[b][0].tokens for b in chosen],
        encoded,
        chosen,
        settings,
        tokenizer,
        aligning,
    )
    grown = {}
    for b, look in zip(chosen, looks, strict=True):
        best, one = found[b][0], plain[b]
        words_of = piece_words(tokenizer.target_pieces(best.tokens), tokenizer.decode_target(best.tokens))
        meeting = {words_of[t] for span in best.constraints if span is not None for t in range(*span)}
        more, _ = _own_words(searched[b], [look], skip=meeting)
        own = tuple(
            (*words, *(w for w in new if w.casefold() not in one.elsewhere and w not in words))
            for words, new in zip(one.own, more, strict=True)
        )
        terms = searched[b].plan.term_words
        spans = best.constraints or (None,) * len(terms)
        unmet = any(span is None for span, at in zip(spans, terms, strict=True) if at is not None)
        if own != one.own or unmet:
            grown[b] = replace(one, own=own), unmet
    return grown


def replacing(
    prepared: Prepared, plain: PlainPass | None, tokenizer: SteeringTokenizer, inflections: "Inflections | None"
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


def _own_words(
    prepared: Prepared, looks: Sequence[_Look], *, skip: Collection[int] = ()
) -> tuple[tuple[tuple[str, ...], ...], frozenset[str]]:
    """Per positive constraint, the words of the outputs (`looks`, the best first) that look hardest at its term's
    source words, less those the module docstring keeps, and the words the best output writes for a source word
    outside every term. `skip`: the best output's words to leave out (those that meet a term)."""
    plan = prepared.plan
    spans = plan.term_words
    in_terms = {s for span in spans if span is not None for s in range(*span)}
    own: list[dict[str, None]] = [{} for _ in spans]
    elsewhere: set[str] = set()
    for k, look in enumerate(looks):
        n_source = look.attention.shape[1] - 1
        words = [_bare(look.words[j]) if j < len(look.words) else "" for j in range(look.attention.shape[0])]
        usable = [bool(_LETTER.search(word)) and not (k == 0 and j in skip) for j, word in enumerate(words)]
        strongest = look.attention[:, :n_source].argmax(axis=0)  # (source words,) each one's strongest target word
        readers = set()  # the words that read a term's source word hardest
        for c, span in enumerate(spans):
            for s in range(*span) if span is not None else ():
                if usable[j := int(strongest[s])] and look.attention[j, s] >= REVERSE_MIN:
                    own[c][words[j]] = None
                    readers.add(j)
        for j, s in enumerate(look.attention.argmax(axis=1).tolist()):  # the source word each word reads hardest
            if not usable[j] or s == n_source:
                continue
            if s not in in_terms and k == 0 and j not in readers:
                elsewhere.add(words[j].casefold())
            for c, span in enumerate(spans):
                if span is not None and span[0] <= s < span[1]:
                    own[c][words[j]] = None
    kept = tuple(
        tuple(
            w
            for w in found
            if w.casefold() not in elsewhere and w.casefold() not in {f.casefold() for f in plan.forms[c]}
        )
        for c, found in enumerate(own)
    )
    return kept, frozenset(elsewhere)


def _bare(word: str) -> str:
    """A word without the punctuation around it."""
    return word.strip(_PUNCTUATION)


def _spells(word: str, own: Sequence[str]) -> bool:
    """Is `word` one of `own` inflected: the one with up to `INFLECTION` letters more or less at its end ("Männer",
    "Männern"), the shorter at least `STEM_LETTERS` long (case ignored)?"""
    folded = word.casefold()
    for w in own:
        short, long = sorted((folded, w.casefold()), key=len)
        if (
            long.startswith(short)
            and len(long) - len(short) <= INFLECTION
            and (short == long or len(short) >= STEM_LETTERS)
        ):
            return True
    return False


class Inflections:
    """The word-starting pieces of a target vocabulary by their first `STEM_LETTERS` letters (casefolded), so that
    `of` finds a word's inflected pieces among a few, not the whole vocabulary, for every word a term replaces."""

    def __init__(self, pieces: Sequence[str]) -> None:
        """`pieces`: every piece of the target vocabulary, by id."""
        self.by_stem: dict[str, list[tuple[str, int]]] = {}
        for i, piece in enumerate(pieces):
            if starts_word(piece) and len(word := piece[1:]) >= STEM_LETTERS:
                self.by_stem.setdefault(word[:STEM_LETTERS].casefold(), []).append((word, i))

    def of(self, word: str) -> list[tuple[int, ...]]:
        """The ids of the word-starting pieces that spell `word` inflected (`_spells`), in either case: the piece
        that starts "Männer" bans it where "Männern" was the model's word."""
        near = self.by_stem.get(word[:STEM_LETTERS].casefold(), [])
        return [(i,) for piece, i in near if _spells(piece, (word,))]


def _inside(form: tuple[int, ...], ids: tuple[int, ...]) -> bool:
    n = len(ids)
    return any(form[i : i + n] == ids for i in range(len(form) - n + 1))
