"""tnmt's own API under `/v1`: the models served, translation with its evidence, and the traced search.

Statuses: 413 over a size limit, 422 over a search limit or a malformed field, 400 an unknown language pair;
the queue and the deadline as serve/models.py says.
"""

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from tnmt.config import DecodeConfig, ServeConfig
from tnmt.decode.trace import Trace
from tnmt.documents.formats import EXTENSIONS
from tnmt.serve.models import (
    ApiError,
    Deadline,
    ServedModel,
    check_limits,
    pick,
    settings_for,
    solo,
    text_work,
    translations,
)
from tnmt.serve.steering_fields import SteeringFields
from tnmt.translate.evidence import TokenAttention
from tnmt.translate.prepared import Prepared
from tnmt.translate.replacements import MAX_K, text_replacements
from tnmt.translate.segment import Layout
from tnmt.translate.translation import SentenceSpan, Translation
from tnmt.translate.translator import Translator
from tnmt.views.inside import Inside, inside
from tnmt.views.inside_view import inside_dict
from tnmt.views.trace import explanation


class TranslateRequest(SteeringFields):
    """POST /v1/translate."""

    text: str | list[str]
    source: str | None = None
    target: str | None = None
    beam_size: int | None = Field(default=None, ge=1)
    n_best: int = Field(default=1, ge=1)
    max_len: int | None = Field(default=None, ge=1)
    return_attention: bool = False
    return_alignment: bool = False
    return_confidence: bool = False
    segment: bool | None = None  # None: the server's setting


class SegmentRequest(BaseModel):
    """POST /v1/segment."""

    model_config = ConfigDict(extra="forbid")
    text: str | list[str]
    source: str | None = None
    target: str | None = None


class AlternativesRequest(SteeringFields):
    """POST /v1/alternatives."""

    text: str
    position: int = Field(ge=0)
    k: int = Field(default=5, ge=1, le=MAX_K)
    source: str | None = None
    target: str | None = None
    beam_size: int | None = Field(default=None, ge=1)
    segment: bool | None = None


class ExplainRequest(SteeringFields):
    """POST /v1/explain."""

    text: str
    sentence: int = Field(default=0, ge=0)  # which sentence of the text is traced (0-based)
    source: str | None = None
    target: str | None = None
    beam_size: int | None = Field(default=None, ge=1)
    top_k: int = Field(default=5, ge=1)
    segment: bool | None = None


class InspectRequest(BaseModel):
    """POST /v1/inspect."""

    model_config = ConfigDict(extra="forbid")

    text: str
    sentence: int = Field(default=0, ge=0)  # which sentence of the text is looked inside (0-based)
    translation: str | None = None  # fed to the decoder instead of the model's own translation of that sentence
    source: str | None = None
    target: str | None = None
    beam_size: int | None = Field(default=None, ge=1)
    top_k: int = Field(default=5, ge=1)
    segment: bool | None = None


def router(models: list[ServedModel], config: ServeConfig) -> APIRouter:
    """`/v1/models`, `/v1/translate`, `/v1/segment`, `/v1/alternatives`, `/v1/explain` and `/v1/inspect` over
    `models`, within `config`'s limits."""
    api = APIRouter()
    for add in (_translation_routes, _segment_route, _replacement_route, _view_routes):
        add(api, models, config)
    return api


def _translation_routes(api: APIRouter, models: list[ServedModel], config: ServeConfig) -> None:
    """`/v1/models` and `/v1/translate`: the batched path."""

    @api.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        """The language pairs served, their architecture, size and decoding defaults, the limits, and the file
        extensions /v1/translate_file reads."""
        search = ("max_chars", "max_texts", "max_beam_size", "max_n_best")
        tracing = ("max_trace_chars", "max_trace_beam", "max_top_k")
        limits = {name: getattr(config, name) for name in (*search, *tracing, "max_glossary", "max_file_bytes")}
        return {"models": [_describe(model) for model in models], "limits": limits, "file_formats": EXTENSIONS}

    @api.post("/v1/translate")
    async def translate(request: TranslateRequest, http: Request) -> dict[str, Any]:
        """Translate a text or a list of texts. Each translation has `warnings` (codes, empty when clean); with
        `return_alignment` its word alignment as [source word, target word] pairs (0-based over the whitespace
        words of the text and of the translation), with `return_confidence` the sentence's and each word's
        probability, with `n_best` > 1 alternatives with scores, with `return_attention` (one text) the
        cross-attention weights and subword pieces."""
        texts = [request.text] if isinstance(request.text, str) else request.text
        if request.return_attention and not isinstance(request.text, str):
            raise ApiError(422, "return_attention needs a single text, not a list")
        if request.return_attention and not request.text.strip():
            raise ApiError(422, "return_attention needs a non-empty text")
        model = pick(models, request.source, request.target)
        settings = settings_for(
            model, config, segment=request.segment, beam_size=request.beam_size, max_len=request.max_len
        )
        check_limits(texts, settings.beam_size, request.n_best, config, size_status=413)
        steering = request.steering(config)
        results = await translations(
            model,
            texts,
            settings,
            n_best=request.n_best,
            attention=request.return_attention,
            deadline=Deadline(config.timeout_s),
            client=http,
            steering=None if steering is None else [steering] * len(texts),
        )
        return {"model": model.id, "translations": [_translation(result, request) for result in results]}


def _segment_route(api: APIRouter, models: list[ServedModel], config: ServeConfig) -> None:
    """`/v1/segment`: how /v1/translate splits a text, without translating it."""

    @api.post("/v1/segment")
    async def segment(request: SegmentRequest) -> dict[str, Any]:
        """Each text's sentences as /v1/translate splits them (translate/segment.py), and the characters between
        them: `gaps` has one entry more than `sentences`, and the text is gaps[0] + sentences[0] + gaps[1] + ...
        + gaps[-1]. A client that translates as the user types (the page) sends only the sentences it has not
        translated yet. No model runs: the answer comes outside the queue (split in the text workers' pool,
        within the deadline)."""
        texts = [request.text] if isinstance(request.text, str) else request.text
        model = pick(models, request.source, request.target)
        check_limits(texts, 1, 1, config, size_status=413)
        layouts = await text_work(lambda: [model.translator.layout(t) for t in texts], Deadline(config.timeout_s))
        return {"model": model.id, "texts": [_segments(layout) for layout in layouts]}


def _replacement_route(api: APIRouter, models: list[ServedModel], config: ServeConfig) -> None:
    """`/v1/alternatives`: another word for one word, queued as solo work."""

    @api.post("/v1/alternatives")
    async def replace_word(request: AlternativesRequest, http: Request) -> dict[str, Any]:
        """The `k` likeliest replacements of word `position` (0-based over the translation's whitespace words) of
        `text`'s translation, each with its probability and the translation that keeps the words before it,
        uses it and translates the rest of its sentence again (translate/replacements.py); steering fields as
        /v1/translate's. A text of several sentences: `position` counts over the whole translation."""
        model = pick(models, request.source, request.target)
        settings = settings_for(model, config, segment=request.segment, beam_size=request.beam_size)
        check_limits([request.text], settings.beam_size, 1, config, size_status=413)
        found = await solo(
            model,
            request.text,
            settings,
            lambda translator, split: text_replacements(translator, split, request.position, request.k, settings),
            deadline=Deadline(config.timeout_s),
            client=http,
            steering=request.steering(config),
            sentence=None,
        )
        return {
            "model": model.id,
            "translation": found.translation.text,
            "position": found.position,
            "word": found.word,
            "alternatives": [asdict(r) for r in found.replacements],
        }


def _view_routes(api: APIRouter, models: list[ServedModel], config: ServeConfig) -> None:
    """`/v1/explain` and `/v1/inspect`: the search and the model's inside, recorded for one sentence (views/)."""

    @api.post("/v1/explain")
    async def explain(request: ExplainRequest, http: Request) -> dict[str, Any]:
        """The search that translates `text`'s sentence `sentence`, step by step (decode/trace.py): every step's
        open hypotheses and their likeliest next tokens, the candidates kept, finished and pruned, and the
        cross-attention rows; `translation` is /v1/translate's text of that sentence for the same settings."""
        model, settings = _recorded(request, models, config, doing="trace")

        def _traced(translator: Translator, prepared: Prepared) -> Trace:
            return translator.trace(prepared.text, settings, top_k=request.top_k, prepared=prepared)

        traced = await solo(
            model,
            request.text,
            settings,
            lambda translator, split: _traced(translator, split.prepared[split.locate(0, request.sentence)]),
            deadline=Deadline(config.timeout_s),
            client=http,
            steering=request.steering(config),
            sentence=request.sentence,
            max_trace_chars=config.max_trace_chars,
        )
        return {"model": model.id, **explanation(traced, model.translator.tokenizer, settings, request.top_k)}

    @api.post("/v1/inspect")
    async def inspect(request: InspectRequest, http: Request) -> dict[str, Any]:
        """Inside the model (views/inside.py): one teacher-forced forward pass over `text`'s sentence `sentence` and
        its translation (the model's own, /v1/translate's for the same settings, or `translation` as given), every
        stage of it:
        pieces and ids, embeddings and positions, masks, each layer's attention per head, add & norm, the
        feed-forward units, and the softmax's `top_k` pieces at each position. Limits as /v1/explain's."""
        if len(request.translation or "") > config.max_trace_chars:
            n = len(request.translation)
            raise ApiError(413, f"translation has {n} characters: over max_trace_chars={config.max_trace_chars}")
        model, settings = _recorded(request, models, config, doing="look inside")

        def _looked(translator: Translator, prepared: Prepared) -> Inside:
            return inside(
                translator,
                prepared.text,
                settings,
                translation=request.translation,
                top_k=request.top_k,
                prepared=prepared,
            )

        found = await solo(
            model,
            request.text,
            settings,
            lambda translator, split: _looked(translator, split.prepared[split.locate(0, request.sentence)]),
            deadline=Deadline(config.timeout_s),
            client=http,
            sentence=request.sentence,
            max_trace_chars=config.max_trace_chars,
        )
        translator = model.translator
        piece = translator.tokenizer.target_pieces
        answer = inside_dict(found, lambda i: piece([i])[0], config=translator.model.config, top_k=request.top_k)
        return {"model": model.id, **answer}


def _recorded(
    request: ExplainRequest | InspectRequest, models: list[ServedModel], config: ServeConfig, *, doing: str
) -> tuple[ServedModel, DecodeConfig]:
    """The model and settings of a request that records one sentence's decoding (/v1/explain, /v1/inspect), within
    the limits of both: a non-empty text, `max_trace_beam` and `max_top_k`, and /v1/translate's limits (413 naming
    the one passed); the sentence recorded is held to `max_trace_chars` when the text is split (`solo`)."""
    if not request.text.strip():
        raise ApiError(422, f"text: needs a non-empty text to {doing}")
    model = pick(models, request.source, request.target)
    settings = settings_for(model, config, segment=request.segment, beam_size=request.beam_size)
    if settings.beam_size > config.max_trace_beam:
        raise ApiError(422, f"beam_size {settings.beam_size}: over max_trace_beam={config.max_trace_beam}")
    if request.top_k > config.max_top_k:
        raise ApiError(422, f"top_k {request.top_k}: over max_top_k={config.max_top_k}")
    check_limits([request.text], settings.beam_size, 1, config, size_status=413)
    return model, settings


def _translation(result: Translation, request: TranslateRequest) -> dict[str, Any]:
    """A `Translation` as the JSON of /v1/translate: its warnings, and what the request asked for."""
    evidence = result.evidence
    answer: dict[str, Any] = {"text": result.text, "warnings": evidence.warnings}
    if result.constraints:
        answer["constraints"] = [asdict(report) for report in result.constraints]
    if request.return_alignment:
        answer["alignment"] = [[i, j] for i, j in evidence.alignment]
    if request.return_confidence:  # "sentence": the whole text's (one sentence's, before texts were split)
        answer["confidence"] = {"sentence": evidence.confidence, "words": evidence.word_probs}
    if len(result.sentences) > 1 or any(s.cuts for s in result.sentences):  # a text that was split
        answer["sentences"] = [_sentence(s, request) for s in result.sentences]
    if request.n_best > 1:
        answer["alternatives"] = [{"text": t.text, "score": t.score} for t in result.nbest]
    if request.return_attention:
        answer["attention"] = _attention(result.attention)
    return answer


def _sentence(sentence: SentenceSpan, request: TranslateRequest) -> dict[str, Any]:
    """One sentence of a translated text: its [start, end) characters in the text and the translation, where it
    was cut (text offsets, when it was too long to translate whole), and what the request asked for of it."""
    answer: dict[str, Any] = {"source": list(sentence.source), "target": list(sentence.target)}
    answer["cuts"] = list(sentence.cuts)
    if request.return_confidence:
        answer["confidence"] = sentence.confidence
    if request.return_attention:
        answer["attention"] = _attention(sentence.attention)
    return answer


def _attention(attention: TokenAttention | None) -> dict[str, Any] | None:
    """A translation's attention as JSON: the cross-attention weights and their subword pieces; None for a text of
    several sentences (each sentence in `sentences` has its own) or one the model read nothing of."""
    if attention is None:
        return None
    source_pieces, target_pieces, maps = attention
    cross = [layer[0].tolist() for layer in maps.cross]  # layers x (H, T, S)
    return {"source_pieces": source_pieces, "target_pieces": target_pieces, "cross": cross}


def _segments(layout: Layout) -> dict[str, list[str]]:
    """A text's sentences and the characters around them, as /v1/segment answers."""
    spans = layout.sentence_spans
    ends, starts = [0, *(end for _, end in spans)], [*(start for start, _ in spans), len(layout.text)]
    return {
        "sentences": [layout.text[start:end] for start, end in spans],
        "gaps": [layout.text[a:b] for a, b in zip(ends, starts, strict=True)],
    }


def _describe(model: ServedModel) -> dict[str, Any]:
    """A served model as /v1/models lists it."""
    network = model.translator.model
    return {
        "id": model.id,
        "source": model.source,
        "target": model.target,
        "trained": model.trained,  # false: a multilingual model's zero-shot pair (tnmt serve --zero-shot)
        "replay": model.run is not None,  # its training run is served: /v1/replay, the page's "Watch it learn"
        "parameters": sum(p.numel() for p in network.parameters()),
        "architecture": asdict(network.config),
        "decoding": asdict(model.translator.decode),
    }
