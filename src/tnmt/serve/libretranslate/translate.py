"""LibreTranslate's translation: each text to its model (the model from its detected language for `source:
"auto"`), as plain text or as an HTML fragment, answered in LibreTranslate's shape with tnmt's evidence.

Every bad request is a 400, LibreTranslate's status on its own endpoints; the queue and the deadline as
serve/models.py says.
"""

import logging
from dataclasses import asdict
from typing import Any

from starlette.requests import Request

from tnmt.config import DecodeConfig, ServeConfig
from tnmt.documents.markup import parse
from tnmt.serve.files import Upload
from tnmt.serve.libretranslate.detect import CONFIDENT, Detector, supported
from tnmt.serve.models import ApiError, Deadline, ServedModel, check_limits, settings_for, text_work, translations
from tnmt.translate.evidence import WARNINGS
from tnmt.translate.steering import Steering
from tnmt.translate.translation import Translation


def served_detector(models: list[ServedModel]) -> Detector | None:
    """The detector of the served source languages lingua knows; None when it knows none of them. A source it
    does not know (a code of one's own, "xx") is never detected: only a request naming it reaches its model."""
    sources = {model.source for model in models}
    known = sorted(sources & supported())
    if unknown := sorted(sources - set(known)):
        logging.getLogger("tnmt").warning(f"language detection does not know {unknown}: source 'auto' never picks them")
    return Detector(known) if known else None


async def languages_of(
    detector: Detector | None, texts: list[str], deadline: Deadline
) -> list[list[tuple[str, float]]]:
    """Each text's languages, best first (detect.py), detected in the text workers' pool within the request's
    deadline: lingua's first call loads its models (about a second) and max_texts long texts take tens of
    milliseconds, which the event loop must not wait for."""
    if detector is None or not texts:
        return [[] for _ in texts]
    return await text_work(lambda: [detector.detect(text) for text in texts], deadline, refused=400)


async def route_auto(
    detector: Detector | None,
    models: list[ServedModel],
    texts: list[str],
    target: str,
    config: ServeConfig,
    *,
    html: bool,
    deadline: Deadline,
) -> tuple[list[ServedModel], list[dict[str, Any]]]:
    """Each text's model for `source: "auto"` and its `detectedLanguage` (the model's source language and the
    detector's confidence in it), each text detected on its own.

    A text detected at `CONFIDENT` or more in a language without a model to `target` is a 400, as LibreTranslate
    answers a source it does not support ("fr is not supported"), rather than another model's translation: French
    through an English model is garbage that looks like an answer. In a list, the first such text is named and
    nothing is translated. A text the detector is less sure of (short, ambiguous: "A deer" is Dutch at 97%) goes
    to the likeliest language with a model to `target`, as do texts without letters (confidence 0 everywhere:
    the first served language by code with one), else to the first model to `target` by source code. An `html`
    fragment is detected by the text of its sentences, without its tags."""
    to_target = sorted((model for model in models if model.target == target), key=lambda model: model.source)
    if not to_target:
        raise ApiError(400, f"no model translates to {target}; served: {', '.join(m.id for m in models)}")
    check_limits(texts, 1, 1, config, size_status=400)  # sizes and Unicode before detecting; search limits later
    by_source = {model.source: model for model in to_target}
    routes, detected = [], []
    if html:  # the words, not the tags
        texts = await text_work(lambda: [" ".join(parse(text).texts) for text in texts], deadline, refused=400)
    for i, found in enumerate(await languages_of(detector, texts, deadline)):
        best, confidence = found[0] if found else (None, 0.0)
        if best is not None and best not in by_source and confidence >= CONFIDENT:
            raise ApiError(400, _unsupported(i, best, confidence, target, models))
        model = next((by_source[code] for code, _ in found if code in by_source), to_target[0])
        routes.append(model)
        detected.append({"confidence": dict(found).get(model.source, 0.0), "language": model.source})
    return routes, detected


DETECTED_CHARS = 10_000  # of a document's text, from its start: what its language is detected on


async def route_document(
    detector: Detector | None, models: list[ServedModel], document: Upload, target: str, config: ServeConfig
) -> ServedModel:
    """The model for a document sent with `source: "auto"`: the one from the language of its text (its units'
    words, without markup, up to `DETECTED_CHARS`), chosen and refused as `route_auto` does a text's."""
    chars = min(DETECTED_CHARS, config.max_chars)
    words = " ".join(unit.text for unit in document.pending.units)[: chars * 2]
    sample = await text_work(
        lambda: " ".join(" ".join(parse(words).texts).split())[:chars], document.deadline, refused=400
    )
    [model], _ = await route_auto(detector, models, [sample], target, config, html=False, deadline=document.deadline)
    return model


def _unsupported(i: int, language: str, confidence: float, target: str, models: list[ServedModel]) -> str:
    """Why text `i`, detected as `language`, is refused: LibreTranslate's words ("fr is not supported", made
    explicit: a target-only language is listed in /languages), then the detection and the models."""
    if language in {model.source for model in models}:
        refusal = f"{target} is not available as a target language from {language}"
    else:
        refusal = f"{language} is not supported as a source language"
    return (
        f"{refusal}: text {i} was detected as {language} ({confidence:g}% confident); served: "
        f"{', '.join(m.id for m in models)}; if the text is not {language}, name its source language instead of auto"
    )


async def answers(
    routes: list[ServedModel],
    texts: list[str],
    text_format: str,
    alternatives: int,
    *,
    config: ServeConfig,
    client: Request,
    deadline: Deadline,
    steering: Steering | None = None,
    segment: bool | None = None,
) -> list[dict[str, Any]]:
    """LibreTranslate's answer for each text, translated by its model in `routes` (steered by `steering`, with the
    answer's `constraints` then; split into segments as `settings_for` says, `segment` the request's field). Every
    model's texts are checked against the limits before any is queued; then one model after another, all within
    the request's `deadline`."""
    groups: dict[str, list[int]] = {}
    for i, model in enumerate(routes):
        groups.setdefault(model.id, []).append(i)
    served = {model.id: model for model in routes}
    for id_, indices in groups.items():
        settings = served[id_].translator.decode
        check_limits(
            [texts[i] for i in indices], settings.beam_size, _n_best(alternatives, settings), config, size_status=400
        )
    answered: list[dict[str, Any]] = [{} for _ in texts]
    for id_, indices in groups.items():
        group = [texts[i] for i in indices]
        settings = settings_for(served[id_], config, segment=segment)
        translated = await _answers(
            served[id_], group, text_format, alternatives, settings, client=client, deadline=deadline, steering=steering
        )
        for i, answer in zip(indices, translated, strict=True):
            answered[i] = answer
    return answered


async def _answers(
    model: ServedModel,
    texts: list[str],
    text_format: str,
    alternatives: int,
    settings: DecodeConfig,
    *,
    client: Request,
    deadline: Deadline,
    steering: Steering | None,
) -> list[dict[str, Any]]:
    """`{"translatedText": ...}` (and `"alternatives"` when asked for) for each text, by one model, with two fields
    of tnmt's own that LibreTranslate clients ignore: `confidence` (0-1, `/v1/translate`'s sentence confidence)
    and `warnings`."""
    if text_format == "html":  # a fragment is as sure as its least sure sentence, and has all their warnings
        answered = []
        for text in texts:
            output, sentences = await _translate_markup(
                model, text, settings, deadline=deadline, client=client, steering=steering
            )
            confidence = min((r.evidence.confidence for r in sentences), default=1.0)
            warnings = [code for code in WARNINGS if any(code in r.evidence.warnings for r in sentences)]
            answer = {"translatedText": output, "confidence": confidence, "warnings": warnings}
            if alternatives:  # none for a fragment, as LibreTranslate answers
                answer["alternatives"] = []
            if steering is not None:  # the sentences' constraints (their `words` index each sentence's words)
                answer["constraints"] = [asdict(c) for r in sentences for c in r.constraints]
            answered.append(answer)
        return answered
    n_best = _n_best(alternatives, settings)
    results = await translations(
        model,
        texts,
        settings,
        n_best=n_best,
        deadline=deadline,
        client=client,
        steering=None if steering is None else [steering] * len(texts),
        refused=400,
    )
    answered = [
        {"translatedText": result.text, "confidence": result.evidence.confidence, "warnings": result.evidence.warnings}
        for result in results
    ]
    if steering is not None:
        for answer, result in zip(answered, results, strict=True):
            answer["constraints"] = [asdict(c) for c in result.constraints]
    if alternatives:
        for answer, result in zip(answered, results, strict=True):
            answer["alternatives"] = [alternative.text for alternative in result.alternatives]
    return answered


async def _translate_markup(
    model: ServedModel,
    fragment: str,
    settings: DecodeConfig,
    *,
    deadline: Deadline,
    client: Request,
    steering: Steering | None = None,
) -> tuple[str, list[Translation]]:
    """The translated fragment (markup.py: each sentence whole, its inline tags carried by the word alignment)
    and the translations of its sentences; parsed and rendered in the text workers' pool."""
    document = await text_work(lambda: parse(fragment), deadline, refused=400)
    texts = document.texts
    steered = None if steering is None else [steering] * len(texts)
    results = (
        await translations(model, texts, settings, deadline=deadline, client=client, steering=steered, refused=400)
        if texts
        else []
    )
    outputs = [(result.text, result.evidence.alignment) for result in results]
    return await text_work(lambda: document.render(outputs), deadline, refused=400), results


def _n_best(alternatives: int, settings: DecodeConfig) -> int:
    """Hypotheses to search for LibreTranslate's `alternatives` (0 to max_n_best - 1, api.py): as many as asked,
    fewer when the model's beam is narrower, as LibreTranslate documents it ("preferred number of alternatives")."""
    return min(alternatives + 1, settings.beam_size) if alternatives > 0 else 1
