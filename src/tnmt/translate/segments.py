"""Prepared segments translated, each as one sentence: one batch's steered search, its look through the model,
and its answer in the user's terms.

A batch is searched once under its steering (translate/term_search.py: the glossary's passes, every pass on the
sources encoded once); one teacher-forced pass over the best translations, on those encoded sources, gives the
attention maps (through every layer) or the evidence (through the aligning layer: translate/evidence.py), which
also places the kept spans and checks the glossary's terms; `finished` puts a steered translation back into the
user's terms (translate/steering.py's `finish`).
"""

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import torch

from tnmt.aligning_head import alignment_layer_index
from tnmt.config import DecodeConfig
from tnmt.decode.hypothesis import Hypothesis
from tnmt.decode.trace import SearchRecorder, Trace
from tnmt.model import EncodedSource
from tnmt.translate.door import ModelDoor
from tnmt.translate.evidence import Evidence, Sentence, TokenAttention, explain
from tnmt.translate.prepared import Planner, Prepared, Source
from tnmt.translate.replaced import term_checks
from tnmt.translate.steering import Plan, SteeringTokenizer, TermChecks, finish
from tnmt.translate.term_search import SteeredSearch, search_replacing
from tnmt.translate.translation import EMPTY, Translation


def translate_segments(
    door: ModelDoor,
    tokenizer: SteeringTokenizer,
    planner: Planner,
    prepared: Sequence[Prepared],
    settings: DecodeConfig,
    batches: Sequence[Sequence[int]],
    *,
    n_best: int,
    attention: bool,
    evidence: bool,
) -> list[Translation]:
    """The translation of each prepared segment, as one sentence, in their order, decoded in `batches` (indices of
    `prepared`); a segment in no batch is `EMPTY`, one the model reads nothing of its kept spans as written."""
    results: list[Translation] = [EMPTY] * len(prepared)
    options = {"n_best": n_best, "attention": attention, "evidence": evidence}
    for chunk in batches:
        found = translated_batch(door, tokenizer, planner, [prepared[i] for i in chunk], settings, **options)
        for i, translation in zip(chunk, found, strict=True):
            results[i] = translation
    for i, p in enumerate(prepared):  # texts the model reads nothing of: only their kept spans ("🐶🐶 🚲")
        if p.source is None and p.plan is not None and p.plan.kept:
            results[i] = finished(EMPTY, [], p.plan, tokenizer, evidence=evidence)
    return results


def steered_search(
    door: ModelDoor,
    tokenizer: SteeringTokenizer,
    planner: Planner,
    batch: Sequence[Prepared],
    settings: DecodeConfig,
    *,
    n_best: int = 1,
    encoder_attention: bool = False,
    recorder: SearchRecorder | None = None,
) -> SteeredSearch:
    """The batch's search under its steering, its glossary terms replacing the model's words (`search_replacing`,
    with the planner's table of the vocabulary's inflections when a term applies)."""
    inflections = planner.inflections if any(p.plan is not None and p.plan.glossed for p in batch) else None
    aligning = alignment_layer_index(settings.alignment_layer, door.model.config.n_decoder_layers)
    return search_replacing(
        door,
        batch,
        settings,
        tokenizer,
        inflections,
        aligning=aligning,
        n_best=n_best,
        encoder_attention=encoder_attention,
        recorder=recorder,
    )


def translated_batch(
    door: ModelDoor,
    tokenizer: SteeringTokenizer,
    planner: Planner,
    batch: Sequence[Prepared],
    settings: DecodeConfig,
    *,
    n_best: int,
    attention: bool,
    evidence: bool,
) -> list[Translation]:
    """The translation of each prepared segment of one batch (each with a source), in its order: its best
    hypothesis with the next `n_best - 1` as alternatives, the attention maps and evidence if asked, and a steered
    one in the user's terms (its kept spans placed by the evidence, its terms checked by the plain pass)."""
    found = steered_search(door, tokenizer, planner, batch, settings, n_best=n_best, encoder_attention=attention)
    searched = found.searched
    aligned = any(p.plan is not None and p.plan.kept for p in searched) or any(found.plain)  # the finish reads it
    extras = _explain(door, tokenizer, searched, found, settings, attention=attention, evidence=evidence or aligned)
    steered = any(p.steers for p in batch)
    results = []
    for p, one, hypotheses, (maps, proof) in zip(searched, found.plain, found.found, extras, strict=True):
        result = replace(_translation(tokenizer, hypotheses), attention=maps, evidence=proof)
        if steered:  # in the user's terms, the evidence as asked (the kept spans' placing read it)
            checks = partial(term_checks, p, one) if one is not None else None
            result = finished(result, hypotheses, p.plan, tokenizer, evidence=evidence, checks=checks)
        results.append(result)
    return results


def traced(
    door: ModelDoor,
    tokenizer: SteeringTokenizer,
    planner: Planner,
    prepared: Prepared,
    settings: DecodeConfig,
    *,
    top_k: int,
) -> Trace:
    """The steered search of one prepared segment, recorded (`Translator.trace` says what it shows).

    Raises:
        UserError: the model reads nothing of the segment (it is all kept as written).
    """
    source = prepared.searched()
    recorder = SearchRecorder(top_k=top_k, length_penalty=settings.length_penalty, eos_id=tokenizer.eos_id)
    found = steered_search(door, tokenizer, planner, [prepared], settings, recorder=recorder)
    encoder = torch.stack([layer[0] for layer in found.encoded.encoder_attention]).float().cpu()  # (L, H, S, S)
    text = tokenizer.decode_target(found.found[0][0].tokens)
    steps = found.recorder.steps
    return Trace(text, labels(tokenizer, source, [])[0], encoder, steps, swapped_in=found.swapped[0])


def finished(
    result: Translation,
    found: list[Hypothesis],
    plan: Plan,
    tokenizer: SteeringTokenizer,
    *,
    evidence: bool,
    checks: TermChecks | None = None,
) -> Translation:
    """A steered translation (`found`: its hypotheses, best first; none for a text the model reads nothing of) in
    the user's terms (translate/steering.py's `finish`, its glossary terms checked by `checks`); its alternatives
    too, their kept spans placed without an alignment of their own (at the ends)."""
    spans = found[0].constraints if found else ()
    text, reports, proof = finish(plan, result.text, result.tokens, spans, result.evidence, tokenizer, checks)
    others = tuple(
        finished(replace(a, evidence=None), [h], plan, tokenizer, evidence=False)
        for a, h in zip(result.alternatives, found[1:], strict=True)
    )
    return replace(result, text=text, constraints=reports, evidence=proof if evidence else None, alternatives=others)


def labels(tokenizer: SteeringTokenizer, source: Source, output: Sequence[int]) -> tuple[list[str], list[str]]:
    """The pieces that label attention: over the source, its ids `prepare` kept and EOS; over the decoder's
    input, the start token and `output`."""
    eos = tokenizer.target_pieces([tokenizer.eos_id])
    return source.pieces[: len(source.ids)] + eos, tokenizer.target_pieces([source.start, *output])


def _explain(
    door: ModelDoor,
    tokenizer: SteeringTokenizer,
    batch: Sequence[Prepared],
    found: SteeredSearch,
    settings: DecodeConfig,
    *,
    attention: bool,
    evidence: bool,
) -> list[tuple[TokenAttention | None, Evidence | None]]:
    """The attention maps and the evidence of one batch's best translations (translate/evidence.py), from one
    teacher-forced pass over them on the search's encoded sources: through every layer when the maps are
    wanted, else only through the aligning layer."""
    if not (attention or evidence):
        return [(None, None)] * len(batch)
    best = [hypotheses[0] for hypotheses in found.found]
    aligning = alignment_layer_index(settings.alignment_layer, door.model.config.n_decoder_layers)
    encoded: EncodedSource = found.encoded
    sources, outputs = [p.source for p in batch], [h.tokens for h in best]
    forced = door.teacher_forced(sources, outputs, encoded=encoded, layers=None if attention else aligning + 1)
    names = [labels(tokenizer, p.source, h.tokens) for p, h in zip(batch, best, strict=True)]
    sentences = [_sentence(tokenizer, p, h) for p, h in zip(batch, best, strict=True)]
    maps = (encoded.encoder_attention or [], names) if attention else None
    return explain(sentences, forced.weights, settings, aligning=aligning, evidence=evidence, maps=maps)


def _sentence(tokenizer: SteeringTokenizer, prepared: Prepared, best: Hypothesis) -> Sentence:
    """A translated sentence as the evidence reads it: what the model read and wrote, with their pieces."""
    source = prepared.source
    return Sentence(
        source_text=prepared.read,
        source_ids=source.ids,
        source_pieces=source.pieces,
        output_text=tokenizer.decode_target(best.tokens),
        output_ids=best.tokens,
        output_pieces=tokenizer.target_pieces(best.tokens),
        ended=best.ended,
        token_log_probs=best.token_log_probs,
    )


def _translation(tokenizer: SteeringTokenizer, hypotheses: list[Hypothesis]) -> Translation:
    """A search's hypotheses, best first, as one `Translation` carrying the others as alternatives."""
    best, *others = (
        Translation(
            tokenizer.decode_target(h.tokens), h.tokens, h.score, h.log_prob, token_log_probs=tuple(h.token_log_probs)
        )
        for h in hypotheses
    )
    return replace(best, alternatives=tuple(others))
