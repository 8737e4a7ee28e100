"""The HTTP application: its APIs mounted as routers, errors as JSON, middleware, metrics, probes and the page.

The APIs: tnmt's own under `/v1` (serve/native.py) and LibreTranslate's (serve/libretranslate/), both over the
served models and their queues (serve/models.py). Errors are JSON `{"error": "..."}` with the status that says
what happened: 413 over a size limit, 422 over a search limit or a malformed field, 400 an unknown language pair
(LibreTranslate's statuses on its own endpoints: 400 for any bad request), 503 + Retry-After when the queue is
full, 504 past the deadline, 408 when the body is not complete within `body_timeout_s` (serve/body_deadline.py),
411 for a chunked body. A client that hangs up before its answer has its sentences dropped from the queue (499
in the metrics).
"""

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tnmt.config import ServeConfig
from tnmt.serve.body_deadline import BodyDeadline
from tnmt.serve.file_store import FileStore
from tnmt.serve.files import FILE_PATHS
from tnmt.serve.files import router as files_api
from tnmt.serve.libretranslate.api import router as libretranslate_api
from tnmt.serve.models import ApiError, Deadline, ServedModel, batchers, translations
from tnmt.serve.native import router as native_api
from tnmt.serve.replay import router as replay_api

STATIC = Path(str(files("tnmt"))) / "serve" / "static"
PROBE = "Hello."  # what /ready translates


def create_app(models: list[ServedModel], config: ServeConfig) -> FastAPI:
    """The FastAPI application; the batchers start and stop with it (lifespan)."""

    store = FileStore(ttl_s=config.file_ttl_s)  # translated files waiting for their download (LibreTranslate's)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for batcher in batchers(models).values():
            batcher.start()
        yield
        for batcher in batchers(models).values():  # uvicorn stopped accepting and finished the requests in flight
            await asyncio.to_thread(batcher.stop)
        store.close()

    # FastAPIOffline is FastAPI whose /docs page loads its scripts from this server, not a CDN. No /redoc:
    # ReDoc still fetches its logo from cdn.redoc.ly.
    app = FastAPIOffline(title="tnmt", summary="Transformer machine translation", lifespan=lifespan, redoc_url=None)
    app.state.file_store = store
    metrics = _Metrics(models)
    for batcher in batchers(models).values():
        batcher.on_batch = metrics.batch_sentences.observe
    app.add_middleware(BodyDeadline, seconds=config.body_timeout_s)  # inside the size limit: added first
    _add_error_handlers(app, config, metrics)
    app.include_router(native_api(models, config))
    app.include_router(files_api(models, config))
    app.include_router(replay_api(models, config))
    app.include_router(libretranslate_api(models, config, store))
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
        for queue, batcher in batchers(models).items():  # "en-de", or a multilingual model's "en,de,fr,cs"
            depth.labels(queue).set_function(lambda b=batcher: b.depth)


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
    """ASGI middleware: refuse bodies over `max_body_bytes` (`max_file_bytes` for a document's routes) and chunked
    ones before they are read, and count
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
        name, limit = (
            ("max_file_bytes", self.config.max_file_bytes)
            if scope["path"] in FILE_PATHS
            else ("max_body_bytes", self.config.max_body_bytes)
        )
        length = headers.get("content-length")
        try:
            if length is None and "transfer-encoding" in headers:  # a chunked body would escape the limit
                await _error(411, "send the body with a Content-Length header")(scope, receive, send_and_note)
            elif length is not None and (not length.isdigit() or int(length) > limit):
                await _error(413, f"request body over {name}={limit}")(scope, receive, send_and_note)
            else:
                await self.app(scope, receive, send_and_note)
        finally:
            endpoint = getattr(scope.get("route"), "path", "other")  # the route, not the raw path: no label per URL
            self.metrics.requests.labels(endpoint, str(status)).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)


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
            await translations(model, [PROBE], decode, deadline=Deadline(config.ready_timeout_s), unavailable=503)
        return {"status": "ready", "models": [model.id for model in models]}


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one shape of every error answer."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)
