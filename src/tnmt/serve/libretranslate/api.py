"""LibreTranslate's endpoints: `/translate`, `/detect`, `/languages` and `/frontend/settings`.

Bodies come as JSON or as forms, as LibreTranslate's clients send them; every bad request is a 400 with
`{"error": ...}`, LibreTranslate's status on its own endpoints.
"""

from contextlib import suppress
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError

from tnmt.config import ServeConfig
from tnmt.documents.formats import EXTENSIONS
from tnmt.serve.file_store import FileStore
from tnmt.serve.libretranslate.detect import Detector
from tnmt.serve.libretranslate.files import router as files_router
from tnmt.serve.libretranslate.translate import answers, languages_of, route_auto, served_detector
from tnmt.serve.models import ApiError, Deadline, ServedModel, check_limits, pick
from tnmt.serve.steering_fields import SteeringFields
from tnmt.translate.glossary import ConflictingEntries
from tnmt.translate.steering import Steering

LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech", "it": "Italian", "es": "Spanish"}
FRONTEND_TIMEOUT_MS = 500  # LibreTranslate's default: how long its page waits after a keystroke to translate


def router(models: list[ServedModel], config: ServeConfig, store: FileStore) -> APIRouter:
    """LibreTranslate's endpoints over `models`, within `config`'s limits, its translated files kept in `store`."""
    api = APIRouter()
    detector = served_detector(models)  # built once; lingua loads its models on the first detection
    _translate_route(api, models, config, detector)
    _language_routes(api, models, config, detector)
    api.include_router(files_router(models, config, store, detector))
    return api


def _translate_route(api: APIRouter, models: list[ServedModel], config: ServeConfig, detector: Detector | None) -> None:
    """`/translate`."""

    @api.post("/translate")
    async def libretranslate(request: Request) -> dict[str, Any]:
        """LibreTranslate's translate: JSON or form body with q (text or list), source ("auto" too: each text goes
        to the model from its detected language, translate.py's `route_auto`), target, format ("text" or "html")
        and alternatives (0 to max_n_best - 1); and tnmt's `glossary` ([{"source", "target"}],
        translate/steering.py), whose answers carry `constraints`, and `segment` (true or false: whether each text
        is split into sentences and lines, translate/segment.py; by default as the server and the model say:
        serve/models.py's `settings_for`)."""
        fields = await _body(request)
        q, source, target = fields.get("q"), fields.get("source"), fields.get("target")
        if q is None or (not isinstance(q, str) and not (isinstance(q, list) and all(isinstance(t, str) for t in q))):
            raise ApiError(400, "Invalid request: missing q parameter (a text or a list of texts)")
        if not isinstance(source, str) or not isinstance(target, str):
            raise ApiError(400, "Invalid request: missing source or target parameter")
        text_format = fields.get("format", "text")
        if text_format not in ("text", "html"):
            raise ApiError(400, f"Invalid request: format must be 'text' or 'html', not {text_format!r}")
        alternatives = _alternatives(fields.get("alternatives", 0), config.max_n_best - 1)
        steering = _glossary(fields.get("glossary"), config)
        segment = _segment(fields.get("segment"))
        texts = [q] if isinstance(q, str) else q
        deadline = Deadline(config.timeout_s)  # detecting, reading and translating: one clock
        if source == "auto":
            html = text_format == "html"
            routes, detected = await route_auto(detector, models, texts, target, config, html=html, deadline=deadline)
        else:
            routes, detected = [pick(models, source, target)] * len(texts), None
        answered = await answers(
            routes,
            texts,
            text_format,
            alternatives,
            config=config,
            client=request,
            deadline=deadline,
            steering=steering,
            segment=segment,
        )
        if detected is not None:
            for answer, language in zip(answered, detected, strict=True):
                answer["detectedLanguage"] = language
        if isinstance(q, str):
            return answered[0]
        return {key: [a[key] for a in answered] for key in answered[0]} if answered else {"translatedText": []}


def _language_routes(api: APIRouter, models: list[ServedModel], config: ServeConfig, detector: Detector | None) -> None:
    """`/detect`, `/languages` and `/frontend/settings`: what is served and which language a text is in."""

    @api.post("/detect")
    async def detect(request: Request) -> list[dict[str, Any]]:
        """LibreTranslate's detect: JSON or form body with q (a text); the languages detect.py gives some confidence
        (0-100, calibrated), served or not, and every served source language (at 0 too), best first: a client reads
        what the text is from the first, and how likely each language it can translate from is. LibreTranslate
        lists its installed languages only, which makes a German text "en" on an English-only server."""
        q = (await _body(request)).get("q")
        if not isinstance(q, str) or not q:
            raise ApiError(400, "Invalid request: missing q parameter (a non-empty text)")
        check_limits([q], 1, 1, config, size_status=400)
        [found] = await languages_of(detector, [q], Deadline(config.timeout_s))
        sources = {model.source for model in models}
        if not found:
            raise ApiError(
                400, f"language detection knows none of the served source languages ({', '.join(sorted(sources))})"
            )
        return [
            {"confidence": confidence, "language": code} for code, confidence in found if confidence or code in sources
        ]

    @api.get("/languages")
    async def languages() -> list[dict[str, Any]]:
        """LibreTranslate's language list: every language served (source or target) and the targets it can be
        translated to. Target-only languages are listed too: LibreTranslate's page looks every target up here."""
        codes = sorted({model.source for model in models} | {model.target for model in models})
        return [
            {
                "code": code,
                "name": LANGUAGE_NAMES.get(code, code),
                "targets": sorted(m.target for m in models if m.source == code),
            }
            for code in codes
        ]

    @api.get("/frontend/settings")
    async def frontend_settings() -> dict[str, Any]:
        """LibreTranslate's settings for its web page: this server's character limit, no API keys, suggestions or
        files, and the languages preselected (source "auto", the first model's target)."""
        target = models[0].target
        return {
            "charLimit": config.max_chars,
            "frontendTimeout": FRONTEND_TIMEOUT_MS,
            "apiKeys": False,
            "keyRequired": False,
            "suggestions": False,
            "filesTranslation": True,
            "supportedFilesFormat": EXTENSIONS,
            "language": {
                "source": {"code": "auto", "name": "Auto Detect"},
                "target": {"code": target, "name": LANGUAGE_NAMES.get(target, target)},
            },
        }


def _alternatives(value: Any, limit: int) -> int:
    """LibreTranslate's `alternatives`: an integer, or a string of one (forms send nothing else), from 0 to `limit`.

    LibreTranslate answers a negative number as 0 and 2.5 as 2; both are refused here, with the range, since
    the client that sends them has a bug it would never hear of. Above its `--alternatives-limit`, LibreTranslate
    refuses with a 400 too."""
    if isinstance(value, str):
        with suppress(ValueError):  # not a number, or over Python's 4300 digits
            value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ApiError(400, f"Invalid request: alternatives must be an integer from 0 to {limit} (max_n_best - 1)")
    return value


def _segment(value: Any) -> bool | None:
    """tnmt's `segment` field: true or false, or a string of one (forms send nothing else); None when not sent."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ApiError(400, f"Invalid request: segment must be true or false, not {value!r}")


async def _body(request: Request) -> dict[str, Any]:
    """A LibreTranslate request's fields, from JSON or from a (urlencoded or multipart) form."""
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            body = await request.json()
        except ValueError:
            raise ApiError(400, "Invalid request: the body is not valid JSON") from None
        if not isinstance(body, dict):
            raise ApiError(400, "Invalid request: the JSON body must be an object")
        return body
    return dict(await request.form())


def _glossary(value: Any, config: ServeConfig) -> Steering | None:
    """The `glossary` extension field as a `Steering` (None when absent), checked as /v1/translate checks it; a bad
    entry is a 400, as LibreTranslate answers every bad request, and two entries that give one term different
    targets a 422, as /v1/translate answers them: the request is well formed and contradicts itself."""
    if value is None:
        return None
    try:
        fields = SteeringFields(glossary=value)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ApiError(400, f"Invalid request: {where}: {problem['msg']}") from None
    try:
        return fields.steering(config)
    except ApiError as error:
        status = 422 if isinstance(error.__cause__, ConflictingEntries) else 400
        raise ApiError(status, f"Invalid request: {error.message}") from None
