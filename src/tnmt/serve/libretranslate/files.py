"""LibreTranslate's file translation: `POST /translate_file` (multipart `file`, `source`, `target`) answers
`{"translatedFileUrl": ...}`, and `GET /download_file/<name>` serves the translated file until it expires
(serve/file_store.py), as LibreTranslate's clients and page expect. Every bad request is a 400."""

from pathlib import PurePath
from typing import Any

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.responses import FileResponse
from starlette.requests import Request

from tnmt.config import ServeConfig
from tnmt.documents.formats import BY_EXTENSION
from tnmt.serve.file_store import FileStore
from tnmt.serve.files import read_upload, translated_document
from tnmt.serve.libretranslate.detect import Detector
from tnmt.serve.libretranslate.translate import route_document
from tnmt.serve.models import ApiError, ServedModel, pick


def router(models: list[ServedModel], config: ServeConfig, store: FileStore, detector: Detector | None) -> APIRouter:
    """`/translate_file` and `/download_file/<name>` over `models` (`detector`: the served sources' languages, for
    `source: "auto"`), the translations kept in `store`."""
    api = APIRouter()

    @api.post("/translate_file")
    async def translate_file(
        http: Request,
        file: UploadFile = File(...),  # noqa: B008 (FastAPI's way of declaring a form field)
        source: str = Form(...),  # noqa: B008
        target: str = Form(...),  # noqa: B008
    ) -> dict[str, Any]:
        """LibreTranslate's file translation: the URL the translated file can be downloaded from. With `source`
        "auto" (what LibreTranslate's page sends) the model is the one from the document's detected language
        (translate.py's `route_auto`, on the start of its text), as for a text."""
        if source != "auto":
            model = pick(models, source, target)
        document = await read_upload(file, None, config, unsupported=400, refused=400)
        if source == "auto":
            model = await route_document(detector, models, document, target, config)
        done = await translated_document(model, document, config, http, refused=400)
        key = store.put(done.name, done.data)
        return {"translatedFileUrl": str(http.url_for("download_file", filename=key))}

    @api.get("/download_file/{filename}", name="download_file")
    async def download_file(filename: str) -> FileResponse:
        """A translated file, until it expires (404 after, or for a name the server never gave)."""
        path = store.get(filename)
        if path is None:
            raise ApiError(404, "no such file: it expired, or was never translated here")
        name = filename.split(".", 1)[1]
        fmt = BY_EXTENSION.get(PurePath(name).suffix.lower())
        media = fmt.media_type if fmt else "application/octet-stream"
        return FileResponse(path, media_type=media, filename=name)

    return api
