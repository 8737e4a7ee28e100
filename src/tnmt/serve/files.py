"""`POST /v1/translate_file`: a document translated in its own format (tnmt/documents), answered as the file.

The document is read as it arrives (a bad file is refused before anything is queued: 422 naming the problem,
415 a format tnmt does not translate), its units go through the model's batcher as the sentences of any request
do (serve/models.py's `translations`: shared batches, the deadline, the queue), and the document is written in a
worker thread (a large one takes a moment). Its size is held by `max_body_bytes` like any request's.
"""

import asyncio
from pathlib import PurePath
from typing import Any

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.responses import Response
from starlette.requests import Request

from tnmt.config import ServeConfig
from tnmt.documents.files import file_format, read_file
from tnmt.errors import UserError
from tnmt.serve.models import ApiError, ServedModel, pick, translations

MEDIA_TYPES = {
    "txt": "text/plain; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "markdown": "text/markdown; charset=utf-8",
    "srt": "application/x-subrip; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
    "po": "text/x-gettext-translation; charset=utf-8",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "odt": "application/vnd.oasis.opendocument.text",
    "xliff": "application/xliff+xml",
}


async def translated_document(
    model: ServedModel,
    upload: UploadFile,
    fmt: str | None,
    config: ServeConfig,
    http: Request,
    *,
    unsupported: int,
    refused: int,
) -> tuple[bytes, str, str]:
    """The uploaded document translated by `model`: its bytes, its format and its name for the target language
    (`talk.srt` -> `talk.de.srt`). A format tnmt does not translate is `unsupported` (415 on /v1), a file its
    format's library refuses `refused` (422 on /v1; LibreTranslate's endpoints answer 400 to both)."""
    name = PurePath(upload.filename or "document").name
    try:
        chosen = file_format(name, fmt)
    except UserError as error:
        raise ApiError(unsupported, str(error)) from None
    try:
        pending = await asyncio.to_thread(read_file, await upload.read(), name, fmt=chosen)
    except UserError as error:
        raise ApiError(refused, str(error)) from None
    found = await translations(
        model,
        [u.text for u in pending.units],
        model.translator.decode,
        timeout=config.timeout_s,
        client=http,
        steering=pending.steering(None),
        refused=refused,
        too_large=413 if refused == 422 else refused,
    )
    out = await asyncio.to_thread(pending.write, found)
    stem, suffix = PurePath(name).stem, PurePath(name).suffix or f".{chosen}"
    return out, chosen, f"{stem}.{model.target}{suffix}"


def router(models: list[ServedModel], config: ServeConfig) -> APIRouter:
    """`/v1/translate_file` over `models`."""
    api = APIRouter()

    @api.post("/v1/translate_file")
    async def translate_file(
        http: Request,
        file: UploadFile = File(...),  # noqa: B008 (FastAPI's way of declaring a form field)
        source: str | None = Form(None),  # noqa: B008
        target: str | None = Form(None),  # noqa: B008
        format: str | None = Form(None),  # noqa: A002, B008 (the API's name)
    ) -> Any:
        """The document `file` translated in its own format (txt, srt, vtt, po, docx, pptx; `format` when its name
        does not say it), answered as a file named after it with the target language (`report.de.docx`)."""
        model = pick(models, source, target)
        out, chosen, name = await translated_document(model, file, format, config, http, unsupported=415, refused=422)
        disposition = f'attachment; filename="{_safe(name)}"'
        return Response(out, media_type=MEDIA_TYPES[chosen], headers={"Content-Disposition": disposition})

    return api


def _safe(name: str) -> str:
    """A file name fit for a Content-Disposition header: printable ASCII without quotes or backslashes."""
    return "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)
