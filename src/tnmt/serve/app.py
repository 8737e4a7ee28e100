"""The HTTP API: a native `/v1` API, LibreTranslate's (`/translate`, `/detect`, `/languages`, `/frontend/settings`),
probes, metrics, the page.

Every sentence goes through its model's `Batcher`, so concurrent requests share decoder batches. Errors
are JSON `{"error": "..."}` with the status that says what happened: 413 over a size limit, 422 over a
search limit or a malformed field, 400 an unknown language pair (LibreTranslate's statuses on its own
endpoints: 400 for any bad request), 503 + Retry-After when the queue is full, 504 past the deadline,
408 when the body is not complete within `body_timeout_s` (serve/body_deadline.py). A client that hangs
up before its answer has its sentences dropped from the queue (499 in the metrics).
"""

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tnmt.checkpoint import load_checkpoint
from tnmt.config import DecodeConfig, ServeConfig
from tnmt.decode.evidence import WARNINGS
from tnmt.decode.trace import Trace, explanation
from tnmt.decode.translator import Translation, Translator
from tnmt.errors import UserError
from tnmt.serve.batcher import Batcher, QueueFull
from tnmt.serve.body_deadline import BodyDeadline
from tnmt.serve.detect import Detector, supported
from tnmt.serve.markup import parse

STATIC = Path(str(files("tnmt"))) / "serve" / "static"
PROBE = "Hello."  # what /ready translates
CLIENT_GONE = 499  # nginx's "client closed request": nobody reads it, the metrics count it
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech", "it": "Italian", "es": "Spanish"}
FRONTEND_TIMEOUT_MS = 500  # LibreTranslate's default: how long its page waits after a keystroke to translate


@dataclass
class ServedModel:
    """One language pair: its translator (the model's defaults in `translator.decode`) and batcher."""

    source: str
    target: str
    translator: Translator
    batcher: Batcher

    @property
    def id(self) -> str:
        return f"{self.source}-{self.target}"


class ApiError(Exception):
    """An error answered as `{"error": message}` with `status` (and optional headers)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


class TranslateRequest(BaseModel):
    """POST /v1/translate."""

    model_config = ConfigDict(extra="forbid")
    text: str | list[str]
    source: str | None = None
    target: str | None = None
    beam_size: int | None = Field(default=None, ge=1)
    n_best: int = Field(default=1, ge=1)
    max_len: int | None = Field(default=None, ge=1)
    return_attention: bool = False
    return_alignment: bool = False
    return_confidence: bool = False


class ExplainRequest(BaseModel):
    """POST /v1/explain."""

    model_config = ConfigDict(extra="forbid")
    text: str
    source: str | None = None
    target: str | None = None
    beam_size: int | None = Field(default=None, ge=1)
    top_k: int = Field(default=5, ge=1)


def load_models(paths: list[Path], config: ServeConfig, *, device: str = "cpu") -> list[ServedModel]:
    """A `ServedModel` per checkpoint, each known by the languages stored in it (one model per pair), on `device`."""
    models: dict[str, ServedModel] = {}
    for path in paths:
        checkpoint = load_checkpoint(path, map_location=device, training=False)
        if checkpoint.languages is None:
            raise UserError(f'{path}: the checkpoint does not name its languages (config.json has no "languages")')
        model = checkpoint.model.to(device).requires_grad_(False)  # served, never trained: frozen (fast_step.py)
        translator = Translator(model, checkpoint.tokenizer, checkpoint.decode, fast_step=config.fast_step)
        batcher = Batcher(
            translator,
            max_queue=config.max_queue,
            max_batch_tokens=config.max_batch_tokens,
            max_wait_ms=config.max_wait_ms,
            batching=config.batching,
            threads=config.threads,
        )
        model = ServedModel(*checkpoint.languages, translator=translator, batcher=batcher)
        if model.id in models:
            raise UserError(f"{path}: a second checkpoint for {model.id}; serve one model per language pair")
        models[model.id] = model
    return list(models.values())


def create_app(models: list[ServedModel], config: ServeConfig) -> FastAPI:
    """The FastAPI application; the batchers start and stop with it (lifespan)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for model in models:
            model.batcher.start()
        yield
        for model in models:  # uvicorn stopped accepting and finished the requests in flight
            await asyncio.to_thread(model.batcher.stop)

    # FastAPIOffline is FastAPI whose /docs page loads its scripts from this server, not a CDN. No /redoc:
    # ReDoc still fetches its logo from cdn.redoc.ly.
    app = FastAPIOffline(title="tnmt", summary="Transformer machine translation", lifespan=lifespan, redoc_url=None)
    metrics = _Metrics(models)
    for model in models:
        model.batcher.on_batch = metrics.batch_sentences.observe
    app.add_middleware(BodyDeadline, seconds=config.body_timeout_s)  # inside the size limit: added first
    _add_error_handlers(app, config, metrics)
    _add_native_api(app, models, config)
    _add_explain_api(app, models, config)
    _add_libretranslate_api(app, models, config)
    _add_probes(app, models, config)
    if STATIC.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")

        @app.get("/", include_in_schema=False)
        async def page() -> FileResponse:
            return FileResponse(STATIC / "index.html")

    return app


class _Metrics:
    """Prometheus metrics in a registry of this app's own (several apps may live in one process)."""

    def __init__(self, models: list[ServedModel]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("tnmt_requests", "HTTP requests", ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram(
            "tnmt_request_seconds",
            "Request latency",
            ["endpoint"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.batch_sentences = Histogram(
            "tnmt_batch_sentences",
            "Sentences per decoder batch",
            registry=self.registry,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
        )
        tasks = Gauge(
            "tnmt_tasks", "asyncio tasks of the server (growth under steady load = a leak)", registry=self.registry
        )
        tasks.set_function(lambda: len(asyncio.all_tasks()))  # read while /metrics answers, in the event loop
        depth = Gauge("tnmt_queue_sentences", "Sentences waiting", ["model"], registry=self.registry)
        for model in models:
            depth.labels(model.id).set_function(lambda m=model: m.batcher.depth)


def _add_error_handlers(app: FastAPI, config: ServeConfig, metrics: _Metrics) -> None:
    app.add_middleware(_MeasureAndLimit, config=config, metrics=metrics)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        return _error(error.status_code, str(error.detail), error.headers)

    @app.exception_handler(ApiError)
    async def api_error(_: Request, error: ApiError) -> JSONResponse:
        return _error(error.status, error.message, error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        if first["type"] == "json_invalid":  # its loc is a character offset, its msg says nothing more
            return _error(422, f"the body is not valid JSON ({first['ctx']['error']} at character {first['loc'][-1]})")
        where = ".".join(str(part) for part in first["loc"] if part != "body") or "body"
        return _error(422, f"{where}: {first['msg']}")

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)


class _MeasureAndLimit:
    """ASGI middleware: refuse bodies over `max_body_bytes` (and chunked ones) before they are read, and count
    every HTTP request and its latency by route and status.

    Plain ASGI rather than `@app.middleware("http")`: Starlette's BaseHTTPMiddleware runs each request in an
    extra task with memory streams, which costs CPU on every request of a loaded server.
    """

    def __init__(self, app: ASGIApp, *, config: ServeConfig, metrics: _Metrics) -> None:
        self.app, self.config, self.metrics = app, config, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), 500  # 500 unless a response starts

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        headers = Headers(scope=scope)
        length, limit = headers.get("content-length"), self.config.max_body_bytes
        try:
            if length is None and "transfer-encoding" in headers:  # a chunked body would escape the limit
                await _error(411, "send the body with a Content-Length header")(scope, receive, send_and_note)
            elif length is not None and (not length.isdigit() or int(length) > limit):
                await _error(413, f"request body over max_body_bytes={limit}")(scope, receive, send_and_note)
            else:
                await self.app(scope, receive, send_and_note)
        finally:
            endpoint = getattr(scope.get("route"), "path", "other")  # the route, not the raw path: no label per URL
            self.metrics.requests.labels(endpoint, str(status)).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)


def _add_native_api(app: FastAPI, models: list[ServedModel], config: ServeConfig) -> None:
    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        """The language pairs served, their architecture, size and decoding defaults, and the limits."""
        search = ("max_chars", "max_texts", "max_beam_size", "max_n_best")
        limits = {name: getattr(config, name) for name in (*search, "max_trace_chars", "max_trace_beam", "max_top_k")}
        return {"models": [_describe(model) for model in models], "limits": limits}

    @app.post("/v1/translate")
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
        model = _pick(models, request.source, request.target)
        changes = {"beam_size": request.beam_size, "max_len": request.max_len}
        settings = replace(model.translator.decode, **{k: v for k, v in changes.items() if v is not None})
        _check_limits(texts, settings.beam_size, request.n_best, config, size_status=413)
        results = await _translate(
            model, texts, settings, request.n_best, request.return_attention, timeout=config.timeout_s, client=http
        )
        return {"model": model.id, "translations": [_translation(result, request) for result in results]}


def _add_explain_api(app: FastAPI, models: list[ServedModel], config: ServeConfig) -> None:
    @app.post("/v1/explain")
    async def explain(request: ExplainRequest, http: Request) -> dict[str, Any]:
        """The search that translates `text`, step by step (decode/trace.py): every step's open hypotheses and
        their likeliest next tokens, the candidates kept, finished and pruned, and the cross-attention rows;
        `translation` is /v1/translate's text for the same settings."""
        if not request.text.strip():
            raise ApiError(422, "text: needs a non-empty text to trace")
        if len(request.text) > config.max_trace_chars:
            raise ApiError(
                413, f"text has {len(request.text)} characters: over max_trace_chars={config.max_trace_chars}"
            )
        model = _pick(models, request.source, request.target)
        settings = model.translator.decode
        if request.beam_size is not None:
            settings = replace(settings, beam_size=request.beam_size)
        if settings.beam_size > config.max_trace_beam:
            raise ApiError(422, f"beam_size {settings.beam_size}: over max_trace_beam={config.max_trace_beam}")
        if request.top_k > config.max_top_k:
            raise ApiError(422, f"top_k {request.top_k}: over max_top_k={config.max_top_k}")
        _check_limits([request.text], settings.beam_size, 1, config, size_status=413)
        [trace] = await _translate(
            model, [request.text], settings, 1, False, timeout=config.timeout_s, client=http, trace=request.top_k
        )
        return {"model": model.id, **explanation(trace, model.translator.tokenizer, settings, request.top_k)}


def _add_libretranslate_api(app: FastAPI, models: list[ServedModel], config: ServeConfig) -> None:
    detector = _detector(models)  # built once; lingua loads its models on the first detection

    @app.post("/translate")
    async def libretranslate(request: Request) -> dict[str, Any]:
        """LibreTranslate's translate: JSON or form body with q (text or list), source ("auto" too: each text goes
        to the model from its detected language), target, format ("text" or "html") and alternatives."""
        fields = await _body(request)
        q, source, target = fields.get("q"), fields.get("source"), fields.get("target")
        if q is None or (not isinstance(q, str) and not (isinstance(q, list) and all(isinstance(t, str) for t in q))):
            raise ApiError(400, "Invalid request: missing q parameter (a text or a list of texts)")
        if not isinstance(source, str) or not isinstance(target, str):
            raise ApiError(400, "Invalid request: missing source or target parameter")
        text_format = fields.get("format", "text")
        if text_format not in ("text", "html"):
            raise ApiError(400, f"Invalid request: format must be 'text' or 'html', not {text_format!r}")
        try:
            alternatives = int(fields.get("alternatives", 0))
        except (TypeError, ValueError, OverflowError):
            raise ApiError(400, "Invalid request: alternatives must be an integer") from None
        texts = [q] if isinstance(q, str) else q
        if source == "auto":
            routes, detected = await _route_auto(detector, models, texts, target, config, html=text_format == "html")
        else:
            routes, detected = [_pick(models, source, target, status=400)] * len(texts), None
        answers = await _libre_answers(routes, texts, text_format, alternatives, config=config, client=request)
        if detected is not None:
            for answer, language in zip(answers, detected, strict=True):
                answer["detectedLanguage"] = language
        if isinstance(q, str):
            return answers[0]
        return {key: [a[key] for a in answers] for key in answers[0]} if answers else {"translatedText": []}

    @app.post("/detect")
    async def detect(request: Request) -> list[dict[str, Any]]:
        """LibreTranslate's detect: JSON or form body with q (a text); every served source language lingua knows,
        best first, with its confidence (0-100; all 0 for a text without letters). serve/detect.py says why."""
        q = (await _body(request)).get("q")
        if not isinstance(q, str) or not q:
            raise ApiError(400, "Invalid request: missing q parameter (a non-empty text)")
        _check_limits([q], 1, 1, config, size_status=400)
        [found] = await _detect(detector, [q])
        if not found:
            sources = ", ".join(sorted({model.source for model in models}))
            raise ApiError(400, f"language detection knows none of the served source languages ({sources})")
        return [{"confidence": confidence, "language": code} for code, confidence in found]

    @app.get("/languages")
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

    @app.get("/frontend/settings")
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
            "filesTranslation": False,
            "supportedFilesFormat": [],
            "language": {
                "source": {"code": "auto", "name": "Auto Detect"},
                "target": {"code": target, "name": LANGUAGE_NAMES.get(target, target)},
            },
        }


def _detector(models: list[ServedModel]) -> Detector | None:
    """The detector of the served source languages lingua knows; None when it knows none of them. A source it
    does not know (a code of one's own, "xx") is never detected: only a request naming it reaches its model."""
    sources = {model.source for model in models}
    known = sorted(sources & supported())
    if unknown := sorted(sources - set(known)):
        logging.getLogger("tnmt").warning(f"language detection does not know {unknown}: source 'auto' never picks them")
    return Detector(known) if known else None


async def _detect(detector: Detector | None, texts: list[str]) -> list[list[tuple[str, float]]]:
    """Each text's served languages, best first, detected in a worker thread: lingua's first call loads its
    models (about a second) and max_texts long texts take tens of milliseconds, which the event loop must not
    wait for."""
    if detector is None or not texts:
        return [[] for _ in texts]
    return await asyncio.to_thread(lambda: [detector.detect(text) for text in texts])


async def _route_auto(
    detector: Detector | None,
    models: list[ServedModel],
    texts: list[str],
    target: str,
    config: ServeConfig,
    *,
    html: bool,
) -> tuple[list[ServedModel], list[dict[str, Any]]]:
    """Each text's model for `source: "auto"` and its `detectedLanguage`: the model from the detected language to
    `target`. A detected language without a model to `target` is a 400, not another model's translation: German
    through an English model is garbage that looks like an answer. With nothing detected (confidence 0: no
    letters, or lingua's rules ruled out every served language) a text goes to the first language in the
    detector's order that has a model to `target`, else to the first model to `target` by source code. An `html`
    fragment is detected by the text of its sentences, without its tags."""
    to_target = sorted((model for model in models if model.target == target), key=lambda model: model.source)
    if not to_target:
        raise ApiError(400, f"no model translates to {target}; served: {', '.join(m.id for m in models)}")
    _check_limits(texts, 1, 1, config, size_status=400)  # sizes and Unicode before detecting; search limits later
    by_source = {model.source: model for model in to_target}
    routes, detected = [], []
    readable = [" ".join(parse(text).texts) for text in texts] if html else texts  # the words, not the tags
    for i, found in enumerate(await _detect(detector, readable)):
        best, confidence = found[0] if found else (None, 0.0)
        if confidence > 0:
            if best not in by_source:
                raise ApiError(
                    400,
                    f"text {i} was detected as {best} ({confidence:g}% confident) and no model translates {best} -> "
                    f"{target}; served: {', '.join(m.id for m in models)}; name the source language instead of auto",
                )
            model = by_source[best]
        else:
            model = next((by_source[code] for code, _ in found if code in by_source), to_target[0])
        routes.append(model)
        detected.append({"confidence": confidence, "language": model.source})
    return routes, detected


async def _libre_answers(
    routes: list[ServedModel],
    texts: list[str],
    text_format: str,
    alternatives: int,
    *,
    config: ServeConfig,
    client: Request,
) -> list[dict[str, Any]]:
    """LibreTranslate's answer for each text, translated by its model in `routes`. Every model's texts are checked
    against the limits before any is queued; then one model after another, each within the deadline."""
    groups: dict[str, list[int]] = {}
    for i, model in enumerate(routes):
        groups.setdefault(model.id, []).append(i)
    served = {model.id: model for model in routes}
    for id_, indices in groups.items():
        settings = served[id_].translator.decode
        n_best = _libre_n_best(alternatives, settings)
        _check_limits([texts[i] for i in indices], settings.beam_size, n_best, config, size_status=400)
    answers: list[dict[str, Any]] = [{} for _ in texts]
    for id_, indices in groups.items():
        group = [texts[i] for i in indices]
        translated = await _libre_translate(served[id_], group, text_format, alternatives, config=config, client=client)
        for i, answer in zip(indices, translated, strict=True):
            answers[i] = answer
    return answers


async def _libre_translate(
    model: ServedModel, texts: list[str], text_format: str, alternatives: int, *, config: ServeConfig, client: Request
) -> list[dict[str, Any]]:
    """`{"translatedText": ...}` (and `"alternatives"` when asked for) for each text, by one model, with two fields
    of tnmt's own that LibreTranslate clients ignore: `confidence` (0-1, `/v1/translate`'s sentence confidence)
    and `warnings`."""
    settings = model.translator.decode
    if text_format == "html":  # a fragment is as sure as its least sure sentence, and has all their warnings
        answers = []
        for text in texts:
            output, sentences = await _translate_markup(model, text, settings, timeout=config.timeout_s, client=client)
            confidence = min((r.evidence.confidence for r in sentences), default=1.0)
            warnings = [code for code in WARNINGS if any(code in r.evidence.warnings for r in sentences)]
            answers.append({"translatedText": output, "confidence": confidence, "warnings": warnings})
        return answers
    n_best = _libre_n_best(alternatives, settings)
    results = await _translate(model, texts, settings, n_best, False, timeout=config.timeout_s, client=client)
    answers: list[dict[str, Any]] = [
        {"translatedText": result.text, "confidence": result.evidence.confidence, "warnings": result.evidence.warnings}
        for result in results
    ]
    if alternatives:
        for answer, result in zip(answers, results, strict=True):
            answer["alternatives"] = [alternative.text for alternative in result.alternatives]
    return answers


def _libre_n_best(alternatives: int, settings: DecodeConfig) -> int:
    """Hypotheses to search for LibreTranslate's `alternatives`: as many as asked, capped by the model's beam."""
    return min(alternatives + 1, settings.beam_size) if alternatives > 0 else 1


def _add_probes(app: FastAPI, models: list[ServedModel], config: ServeConfig) -> None:
    @app.get("/health")
    async def health() -> dict[str, str]:
        """The process answers (says nothing about the models: see /ready)."""
        return {"status": "ok"}

    @app.get("/ready")
    async def ready() -> dict[str, Any]:
        """Every model translates a probe sentence within `ready_timeout_s`; 503 otherwise."""
        for model in models:
            decode = model.translator.decode
            await _translate(model, [PROBE], decode, 1, False, timeout=config.ready_timeout_s, unavailable=503)
        return {"status": "ready", "models": [model.id for model in models]}


async def _translate(
    model: ServedModel,
    texts: list[str],
    settings: DecodeConfig,
    n_best: int,
    attention: bool,
    *,
    timeout: float,
    unavailable: int = 504,
    client: Request | None = None,
    trace: int | None = None,
) -> list[Translation] | list[Trace]:
    """Queue the texts on the model's batcher and wait for them, at most `timeout` seconds and only while
    the `client` is connected: past the deadline or once it hung up, the sentences not started are dropped."""
    try:
        futures = model.batcher.submit(texts, settings, n_best=n_best, attention=attention, trace=trace)
    except QueueFull as full:
        raise ApiError(503, f"server busy: {full}", {"Retry-After": "1"}) from None
    results = asyncio.ensure_future(asyncio.gather(*[asyncio.wrap_future(future) for future in futures]))
    results.add_done_callback(_retrieve)
    hang_up = asyncio.ensure_future(_hang_up(client)) if client is not None else None
    try:
        await asyncio.wait([results, hang_up] if hang_up else [results], timeout=timeout, return_when="FIRST_COMPLETED")
    finally:
        if hang_up:
            hang_up.cancel()
        if not results.done():
            results.cancel()  # cancels the futures: the worker skips what it has not started
    if results.done() and not results.cancelled():
        return results.result()
    if hang_up and hang_up.done() and not hang_up.cancelled():
        raise ApiError(CLIENT_GONE, "the client closed the connection before the answer")
    raise ApiError(unavailable, f"no translation within the deadline of {timeout:g} s")


def _retrieve(results: asyncio.Future) -> None:
    """Mark the outcome of a request's gather as seen. One cancelled at the deadline or on a hang-up ends holding
    a CancelledError nobody awaits, which asyncio would log at exit as "exception was never retrieved"."""
    if not results.cancelled():
        results.exception()


async def _hang_up(client: Request) -> None:
    """Return when the client disconnects (the body is read: what can still arrive is the disconnect)."""
    while (await client.receive())["type"] != "http.disconnect":
        pass


async def _translate_markup(
    model: ServedModel, fragment: str, settings: DecodeConfig, *, timeout: float, client: Request
) -> tuple[str, list[Translation]]:
    """The translated fragment (serve/markup.py: each sentence whole, its inline tags carried by the word
    alignment) and the translations of its sentences."""
    document = parse(fragment)
    texts = document.texts
    results = await _translate(model, texts, settings, 1, False, timeout=timeout, client=client) if texts else []
    return document.render([(result.text, result.evidence.alignment) for result in results]), results


def _pick(models: list[ServedModel], source: str | None, target: str | None, *, status: int = 400) -> ServedModel:
    """The model for a pair; a missing side is filled when exactly one served model fits."""
    fits = [m for m in models if source in (None, m.source) and target in (None, m.target)]
    if len(fits) != 1:
        served = ", ".join(model.id for model in models)
        wanted = f"{source or '?'} -> {target or '?'}"
        reason = "no model translates" if not fits else "several models fit"
        raise ApiError(status, f"{reason} {wanted}; served: {served}")
    return fits[0]


def _check_limits(texts: list[str], beam_size: int, n_best: int, config: ServeConfig, *, size_status: int) -> None:
    search_status = 422 if size_status == 413 else size_status
    for limit in ("max_texts", "max_queue"):  # a request larger than the whole queue could never be served
        if len(texts) > getattr(config, limit):
            raise ApiError(size_status, f"{len(texts)} texts: over {limit}={getattr(config, limit)}")
    for i, text in enumerate(texts):
        if len(text) > config.max_chars:
            raise ApiError(size_status, f"text {i} has {len(text)} characters: over max_chars={config.max_chars}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, which JSON allows as \ud800
            raise ApiError(search_status, f"text {i} is not valid Unicode (a lone surrogate)") from None
    if beam_size > config.max_beam_size:
        raise ApiError(search_status, f"beam_size {beam_size}: over max_beam_size={config.max_beam_size}")
    if n_best > min(beam_size, config.max_n_best):
        limit = f"beam_size={beam_size}" if n_best > beam_size else f"max_n_best={config.max_n_best}"
        raise ApiError(search_status, f"n_best {n_best}: over {limit}")


def _translation(result: Translation, request: TranslateRequest) -> dict[str, Any]:
    """A `Translation` as the JSON of /v1/translate: its warnings, and what the request asked for."""
    evidence = result.evidence
    answer: dict[str, Any] = {"text": result.text, "warnings": evidence.warnings}
    if request.return_alignment:
        answer["alignment"] = [[i, j] for i, j in evidence.alignment]
    if request.return_confidence:
        answer["confidence"] = {"sentence": evidence.confidence, "words": evidence.word_probs}
    if request.n_best > 1:
        answer["alternatives"] = [{"text": t.text, "score": t.score} for t in result.nbest]
    if result.attention is not None:
        source_pieces, target_pieces, maps = result.attention
        cross = [layer[0].tolist() for layer in maps.cross]  # layers x (H, T, S)
        answer["attention"] = {"source_pieces": source_pieces, "target_pieces": target_pieces, "cross": cross}
    return answer


def _describe(model: ServedModel) -> dict[str, Any]:
    network = model.translator.model
    config = asdict(network.config)
    return {
        "id": model.id,
        "source": model.source,
        "target": model.target,
        "parameters": sum(p.numel() for p in network.parameters()),
        "architecture": config,
        "decoding": asdict(model.translator.decode),
    }


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


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)
