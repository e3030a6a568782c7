"""Refuse oversized request bodies with ``413 too_large`` before they are read whole.

An ASGI middleware: a request whose ``Content-Length`` exceeds the limit is answered at once,
without reading any of its body; a body without a length (chunked) is counted while the route
reads it and the read fails with 413 as soon as it passes the limit, so no route ever holds more
than ``limit`` bytes of one request in memory. The limit covers the largest legitimate body: an
upload of ``max_upload_bytes`` as base64 in JSON, or a file of ``MAX_FILE_BYTES`` (file PUT).

Threat model: clients are untrusted; a body is never buffered past the limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rockroll.api.server.errors import error_body

__all__ = ["BodyLimit", "body_limit_for"]

JSON_OVERHEAD = 64 * 1024


def body_limit_for(max_upload_bytes: int, max_file_bytes: int) -> int:
    """Largest body accepted: a base64 upload of ``max_upload_bytes`` in JSON, or a raw file."""
    return max(4 * ((max_upload_bytes + 2) // 3) + JSON_OVERHEAD, max_file_bytes + JSON_OVERHEAD)


class BodyLimit:
    """The middleware (see the module docstring); ``limit`` is read per request (None: no limit)."""

    def __init__(self, app: ASGIApp, limit: Callable[[Scope], int | None]) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.limit(scope) if scope["type"] == "http" else None
        if limit is None:
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await self._refuse(send, limit)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, f"the request body exceeds {limit} bytes")
            return message

        await self.app(scope, counted, send)

    @staticmethod
    async def _refuse(send: Send, limit: int) -> None:
        body = json.dumps(error_body("too_large", f"the request body exceeds {limit} bytes", {"limit": limit})).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
