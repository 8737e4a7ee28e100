"""A deadline on receiving a request body: a client that sends its body slowly gets 408, not a free slot.

uvicorn bounds the headers (h11's 16 KB incomplete-event limit) and idle keep-alive connections
(`timeout_keep_alive`) but waits for a body as long as the client keeps the connection open: a few
hundred clients trickling a byte a minute would each hold a connection and a request task forever.
So the body is read in full, within `seconds`, before the application sees the request; the
application then gets it in one piece, and further `receive()` calls (a disconnect) pass through.
"""

import asyncio
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyDeadline:
    """ASGI middleware: 408 `{"error": ...}` when the body is not complete within `seconds`."""

    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            messages = await asyncio.wait_for(_read_body(receive), self.seconds)
        except TimeoutError:
            error = f"the request body did not arrive within {self.seconds:g} s"
            response = JSONResponse({"error": error}, status_code=408, headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        pending = iter(messages)

        async def replay() -> Message:
            return next(pending, None) or await receive()

        await self.app(scope, replay, send)


async def _read_body(receive: Receive) -> list[Any]:
    """The messages up to the end of the body, merged into one (or the disconnect that cut it short)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return [message]
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
