"""`POST /v1/translate_file`: a document translated in its own format (tnmt/documents), answered as the file, or
with `evidence=true` as JSON: the file (base64) and a report per segment (documents/report.py).

The document is read as it arrives (a bad file is refused before anything is queued: 422 naming the problem,
415 a format tnmt does not translate), its units go through the model's batcher as the sentences of any request
do (serve/models.py's `translations`: shared batches, the deadline, a share of the queue at a time), and the
document is read and written in the text workers' pool (a large one takes a moment), within the request's
deadline, which grows with the document's segments (`timeout_per_segment_s`). Its upload is held to `max_file_bytes`
(serve/app.py) and its archive to the limits of documents/archive.py; its size is bounded by those, not by the
queue. A client that names its upload with a `progress` token (the page does) can follow it on
`GET /v1/translate_file/progress/{token}` while it is translated: its segments decoded and its segments in all.
"""

import base64
import json
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.requests import Request

from tnmt.config import ServeConfig
from tnmt.documents.formats import Format, file_format
from tnmt.documents.report import segment_report
from tnmt.documents.units import Pending
from tnmt.errors import UserError
from tnmt.serve.models import ApiError, Deadline, ServedModel, pick, settings_for, text_work, translations
from tnmt.serve.steering_fields import SteeringFields
from tnmt.translate.steering import Steering

FILE_PATHS = ("/v1/translate_file", "/translate_file")  # the routes that take a document (`max_file_bytes`)
PROGRESS_TOKEN = re.compile(r"[A-Za-z0-9_-]{8,64}")  # a client's name for its upload: a random id (the page's UUID)


@dataclass(frozen=True)
class Upload:
    """A document as it arrived, read in its format and waiting for its units' translations; its request's
    deadline, which reading it started and translating and writing it share."""

    name: str
    fmt: Format
    pending: Pending
    deadline: Deadline


@dataclass(frozen=True)
class Translated:
    """A document translated: its bytes, its format, its name for the target language (`talk.srt` ->
    `talk.de.srt`) and its report per segment."""

    data: bytes
    fmt: Format
    name: str
    report: dict[str, Any]


async def read_upload(
    upload: UploadFile, fmt: str | None, config: ServeConfig, *, unsupported: int, refused: int
) -> Upload:
    """The uploaded document read in its format, in the text workers' pool. A format tnmt does not translate is
    `unsupported` (415 on /v1), a file its format's library refuses `refused` (422 on /v1; LibreTranslate's
    endpoints answer 400 to both)."""
    name = PurePath(upload.filename or "document").name
    try:
        chosen = file_format(name, fmt)
    except UserError as error:
        raise ApiError(unsupported, str(error)) from None
    deadline = Deadline(config.timeout_s)
    data = await upload.read()
    pending = await text_work(lambda: chosen.read(data, name), deadline, refused=refused)
    return Upload(name, chosen, pending, deadline)


async def translated_document(
    model: ServedModel,
    document: Upload,
    config: ServeConfig,
    http: Request,
    *,
    refused: int,
    steering: Steering | None = None,
    progress: dict[str, int] | None = None,
) -> Translated:
    """The document translated by `model` and written in its format (in the text workers' pool), within its
    deadline (`timeout_s`, and `timeout_per_segment_s` for each segment: a document's time grows with its size); a
    steering entry that cannot be met is `refused`. `progress` is kept up to date: `done` and `segments`."""
    pending = document.pending
    found = await translations(
        model,
        [u.text for u in pending.units],
        settings_for(model, config),
        deadline=document.deadline,
        client=http,
        steering=pending.steering(steering),
        refused=refused,
        grow_s=config.timeout_per_segment_s,
        progress=None if progress is None else lambda done, total: progress.update(done=done, segments=total),
    )
    out, report = await text_work(  # the report too: a pass over every segment's text, not for the event loop
        lambda: (pending.write(found), segment_report(pending.units, found, pending.left)),
        document.deadline,
        refused=refused,
    )
    stem, suffix = PurePath(document.name).stem, PurePath(document.name).suffix or document.fmt.extensions[0]
    return Translated(out, document.fmt, f"{stem}.{model.target}{suffix}", report)


def router(models: list[ServedModel], config: ServeConfig) -> APIRouter:
    """`/v1/translate_file` over `models`, and the progress of the uploads that named a token."""
    api = APIRouter()
    following: dict[str, dict[str, int]] = {}  # progress token -> {"done", "segments"}, while its upload runs

    @api.post("/v1/translate_file")
    async def translate_file(
        http: Request,
        file: UploadFile = File(...),  # noqa: B008 (FastAPI's way of declaring a form field)
        source: str | None = Form(None),  # noqa: B008
        target: str | None = Form(None),  # noqa: B008
        format: str | None = Form(None),  # noqa: A002, B008 (the API's name)
        evidence: bool = Form(False),  # noqa: B008
        glossary: str | None = Form(None),  # noqa: B008
        do_not_translate: str | None = Form(None),  # noqa: B008
        progress: str | None = Form(None),  # noqa: B008
    ) -> Any:
        """The document `file` translated in its own format (`format` when its name does not say it), answered as
        a file named after it with the target language (`report.de.docx`); with `evidence`, as JSON: `filename`,
        `media_type`, `file` (base64) and `report` (a segment each: confidence, warnings, terms met, split).
        `glossary` and `do_not_translate` are JSON, as /v1/translate takes them, and apply to every segment.
        `progress`: a token (8 to 64 letters, digits, `-` or `_`) its progress can be read under while it runs."""
        if progress is not None and (not PROGRESS_TOKEN.fullmatch(progress) or progress in following):
            raise ApiError(422, "progress: a token of 8 to 64 letters, digits, '-' or '_', not one in use")
        model = pick(models, source, target)
        steering = _steering(config, glossary=glossary, do_not_translate=do_not_translate)
        counts = {"done": 0, "segments": 0}
        if progress is not None:
            following[progress] = counts
        try:
            document = await read_upload(file, format, config, unsupported=415, refused=422)
            done = await translated_document(
                model, document, config, http, refused=422, steering=steering, progress=counts
            )
        finally:
            if progress is not None:
                del following[progress]
        if evidence:
            encoded = base64.b64encode(done.data).decode("ascii")
            return {"filename": done.name, "media_type": done.fmt.media_type, "file": encoded, "report": done.report}
        disposition = f'attachment; filename="{_safe(done.name)}"'
        return Response(done.data, media_type=done.fmt.media_type, headers={"Content-Disposition": disposition})

    @api.get("/v1/translate_file/progress/{token}")
    async def file_progress(token: str) -> dict[str, int]:
        """The upload named `token`: its segments decoded (`done`) and in all (`segments`, 0 until it is read)."""
        if token not in following:
            raise ApiError(404, f"progress {token!r}: no upload of this token is being translated")
        return dict(following[token])

    return api


def _steering(config: ServeConfig, **fields: str | None) -> Steering | None:
    """The steering of a document's form fields, each a JSON text (`glossary`: [{"source", "target"}, ...]).

    Raises:
        ApiError: 422 a field that is not JSON or not of its shape, naming it; what /v1/translate refuses.
    """
    values = {}
    for name, text in fields.items():
        if text is not None:
            try:
                values[name] = json.loads(text)
            except json.JSONDecodeError as error:
                raise ApiError(422, f"{name}: not JSON ({error.msg} at character {error.pos})") from None
    try:
        return SteeringFields.model_validate(values).steering(config)
    except ValidationError as error:
        first = error.errors()[0]
        raise ApiError(422, f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _safe(name: str) -> str:
    """A file name fit for a Content-Disposition header: printable ASCII without quotes or backslashes."""
    return "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)
