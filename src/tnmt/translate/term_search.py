"""The search of a glossary's sentences: each term in the place of the model's own word for its source.

translate/replaced.py learns those words and bans them; this is the order of the passes (`search_replacing`), one
batch at a time: a plain pass, the constrained search with the words banned, a second search for a sentence whose
translation still doubles or leaves out a term, and the plain translation with the terms swapped in, scored by the
model beside what the search found. The swap wins where the model scores it better, or where the search's result
dropped words of the plain translation to make room for a term (a loss a glossary's user does not accept).
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from tnmt.config import DecodeConfig
from tnmt.decode.bans import has_loop
from tnmt.decode.constraints import Constraints
from tnmt.decode.hypothesis import Hypothesis
from tnmt.decode.trace import SearchRecorder
from tnmt.model import EncodedSource
from tnmt.translate.door import ModelDoor
from tnmt.translate.evidence import piece_words
from tnmt.translate.prepared import Prepared
from tnmt.translate.replaced import (
    Inflections,
    PlainPass,
    bare_word,
    candidate_places,
    looks_of,
    plain_passes,
    replacing,
    scored,
)
from tnmt.translate.steering import SteeringTokenizer


@dataclass(frozen=True)
class SteeredSearch:
    """One batch's steered search (`search_replacing`): the sources encoded once, which every pass read; per
    sentence its hypotheses (best first), the text as the kept hypotheses were searched (its constraints, the
    words banned), its plain pass (None where no glossary term applies), whose own words the checks of the result
    read (`term_checks`), and whether the best is the plain translation with the terms swapped in; and the
    recorder of the search whose hypotheses are kept (a trace's batch of one)."""

    encoded: EncodedSource
    found: list[list[Hypothesis]]
    searched: list[Prepared]
    plain: list[PlainPass | None]
    swapped: list[bool]
    recorder: SearchRecorder | None = None


def search_replacing(
    door: ModelDoor,
    batch: Sequence[Prepared],
    settings: DecodeConfig,
    tokenizer: SteeringTokenizer,
    inflections: Inflections | None,
    *,
    aligning: int,
    n_best: int = 1,
    encoder_attention: bool = False,
    recorder: SearchRecorder | None = None,
) -> SteeredSearch:
    """`door.search` of a batch under its steering, each glossary term replacing the model's own words for its source:
    a plain pass learns them (`plain_passes`), the search bans them (`replacing`), and a sentence is searched once
    more (`_second_round`) when its best translation still writes a word for a term's source beside the term (a
    second synonym: "Kids" where "Kinder" was banned; that word is banned too) or leaves a term out (its attention
    never came near the term's source, or a second occurrence of the term went unwritten: the terms are then offered
    wherever the search is); its result is kept unless it meets fewer terms. Last, the plain translation with the
    terms in their words' places (`PlainPass.swaps`) is scored by the model as one more finished hypothesis
    (`_swapped_in`): a beam misses it where the term is a word the model rarely writes, whose low probability prunes
    the prefix that leads to it. The sources are encoded once, for every pass. A `recorder` (a batch of one) is
    given the search whose hypotheses are kept: each round records into its own."""
    sources = [p.source for p in batch]
    encoded = door.encode(sources, need_weights=encoder_attention or recorder is not None)
    plain = plain_passes(door, batch, settings, tokenizer, aligning=aligning, encoded=encoded)
    searched = [replacing(p, one, tokenizer, inflections) for p, one in zip(batch, plain, strict=True)]
    constraints = [p.plan.constraints for p in searched] if any(p.steers for p in batch) else None
    options = {"n_best": n_best, "recorder": recorder}
    _, found = door.search(sources, settings, constraints=constraints, encoded=encoded, **options)
    again = _second_round(door, searched, plain, found, encoded, settings, tokenizer, aligning)
    if again:
        chosen = sorted(again)
        offered = {}
        for b, (one, anywhere) in again.items():
            plain[b] = one  # the words learned stand whichever round is kept: the checks read them
            offered[b] = _offered(replacing(batch[b], one, tokenizer, inflections), anywhere)
        second = _fresh(recorder)
        _, refound = door.search(
            [sources[b] for b in chosen],
            settings,
            n_best=n_best,
            constraints=[offered[b].plan.constraints for b in chosen],
            recorder=second,
            encoded=encoded.select(torch.tensor(chosen, device=door.device)),
        )
        for b, hypotheses in zip(chosen, refound, strict=True):
            if hypotheses and hypotheses[0].met >= found[b][0].met:  # a second search that meets fewer terms loses
                found[b], searched[b] = hypotheses, offered[b]
                recorder = second if recorder is not None else None
    swapped = [False] * len(batch)
    if any(one is not None and one.swaps for one in plain):
        swapped = _swapped_in(door, searched, plain, found, encoded, settings, tokenizer)
    return SteeredSearch(encoded, found, searched, plain, swapped, recorder)


def _offered(prepared: Prepared, anywhere: bool) -> Prepared:
    """`prepared` for a second round: with `anywhere`, each term offered at every step, wherever the attention is
    (no source tokens tie it)."""
    if not anywhere:
        return prepared
    plan = prepared.plan
    return replace(prepared, plan=replace(plan, constraints=replace(plan.constraints, sources=())))


def _fresh(recorder: SearchRecorder | None) -> SearchRecorder | None:
    """A recorder like `recorder` with nothing recorded (a second round's), None for none."""
    if recorder is None:
        return None
    return SearchRecorder(top_k=recorder.top_k, length_penalty=recorder.alpha, eos_id=recorder.eos_id)


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
    their best steered translation writes for a term's source outside the words that meet a term and that the plain
    translation does not write ("Kids"; not the article that both write before the term), and whether a glossary
    term of theirs went unmet."""
    chosen = [b for b, one in enumerate(plain) if one is not None and found[b] and found[b][0].tokens]
    seen = looks_of(
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
    for b, look in zip(chosen, seen, strict=True):
        best, one = found[b][0], plain[b]
        words_of = piece_words(tokenizer.target_pieces(best.tokens), tokenizer.decode_target(best.tokens))
        meeting = {words_of[t] for span in best.constraints if span is not None for t in range(*span)}
        places = candidate_places(searched[b], look, skip=meeting)
        more = [[bare_word(look.words[j]) for j in js] for js in places]
        own = tuple(
            (*words, *(w for w in new if w.casefold() not in one.written and w not in words))
            for words, new in zip(one.own, more, strict=True)
        )
        terms = searched[b].plan.term_words
        spans = best.constraints or (None,) * len(terms)
        unmet = any(span is None for span, at in zip(spans, terms, strict=True) if at is not None)
        if own != one.own or unmet:
            grown[b] = replace(one, own=own), unmet
    return grown


def _swapped_in(
    door: ModelDoor,
    searched: Sequence[Prepared],
    plain: Sequence[PlainPass | None],
    found: list[list[Hypothesis]],
    encoded: EncodedSource,
    settings: DecodeConfig,
    tokenizer: SteeringTokenizer,
) -> list[bool]:
    """Score each sentence's swaps (`PlainPass.swaps`) by one teacher-forced pass, and put one first in `found[b]`
    where it meets every constraint the search's best meets, obeys the steering (`_meets`), and scores better (the
    length penalty as the search's) or loses fewer of the plain translation's words (`PlainPass.dropped`): a
    translation that dropped a phrase to make room for a term is not what a glossary asks for, however the model
    scores it. Returns, per sentence, whether a swap was put first."""
    put_first = [False] * len(searched)
    chosen = [(b, text) for b, one in enumerate(plain) if one is not None and found[b] for text in one.swaps]
    outputs = [tokenizer.encode_target(text) for _, text in chosen]
    kept = [(b, ids) for (b, _), ids in zip(chosen, outputs, strict=True) if ids]
    texts = [text for (_, text), ids in zip(chosen, outputs, strict=True) if ids]
    if not kept:
        return put_first
    index = torch.tensor([b for b, _ in kept], device=door.device)
    sources = [searched[b].source for b, _ in kept]
    hypotheses = scored(door, sources, [ids for _, ids in kept], encoded.select(index), settings.length_penalty)
    for k, ((b, ids), hypothesis) in enumerate(zip(kept, hypotheses, strict=True)):
        spans = _meets(searched[b].plan.constraints, ids, block_loops=settings.block_loops)
        if spans is None:
            continue
        candidate = replace(hypothesis, constraints=spans)
        best, terms = found[b][0], searched[b].plan.term_words
        loses = plain[b].dropped(tokenizer.decode_target(best.tokens), terms) > plain[b].dropped(texts[k], terms)
        if candidate.met >= best.met and (candidate.score > best.score or loses) and candidate.tokens != best.tokens:
            found[b] = [candidate, *(h for h in found[b] if h.tokens != ids)][: len(found[b])]
            put_first[b] = True
    return put_first


def _meets(constraints: Constraints, ids: list[int], *, block_loops: bool) -> tuple[tuple[int, int], ...] | None:
    """Where `ids` meets each required phrase (the first occurrence of one of its forms that no earlier phrase took,
    not continued by a piece that continues the word), or None when one is unmet, an avoided phrase is in it, its
    prefix is not the one forced, or it loops where the search would not let it. (The words the terms replace are
    not checked: a swap keeps the plain translation's other words, which are the model's own for other source
    words.)"""
    if tuple(ids[: len(constraints.prefix)]) != constraints.prefix:
        return None
    if any(_occurrences(ids, phrase, None) for phrase in constraints.avoided):
        return None
    if block_loops and not constraints.allow_loops and has_loop(ids):
        return None
    spans: list[tuple[int, int]] = []
    for forms in constraints.required:  # an occurrence meets one constraint, as in the search
        at = [s for form in forms for s in _occurrences(ids, form, constraints.continuations) if s not in spans]
        if not at:
            return None
        spans.append(min(at))
    return tuple(spans)


def _occurrences(ids: list[int], phrase: tuple[int, ...], continuations: torch.Tensor | None) -> list[tuple[int, int]]:
    """Every [start, end) where `phrase` is in `ids`, not followed by a piece that continues its last word (when
    `continuations` marks them)."""
    n, found = len(phrase), []
    for start in range(len(ids) - n + 1):
        if tuple(ids[start : start + n]) == phrase:
            follows = ids[start + n] if start + n < len(ids) else None
            if follows is None or continuations is None or not bool(continuations[follows]):
                found.append((start, start + n))
    return found
