"""Refuse oversized request bodies with ``413 too_large`` before they are read whole.

An ASGI middleware, the sandbox layer's :class:`rockroll.sandbox.body_limit.BodyLimit` with the
limit read per request: a request whose ``Content-Length`` exceeds the limit is answered at once,
without reading any of its body; a body without a length (chunked) is counted while the route reads
it, and as soon as it passes the limit the request is answered 413 and the connection closed (the
rest is never read) while the route's read fails with an ``HTTPException(413)``. So no route ever
holds more than ``limit`` bytes of one request in memory, and an answer given before a body was
read to its end (a 401, a 404) closes the connection rather than drain the body. The limit covers
the largest legitimate body: an upload of ``max_upload_bytes`` as base64 in JSON, or a file of
``MAX_FILE_BYTES`` (file PUT).

Threat model: clients are untrusted; a body is never buffered past the limit.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Scope

from rockroll.sandbox.body_limit import BodyLimit as _StreamLimit

__all__ = ["BodyLimit", "body_limit_for"]

JSON_OVERHEAD = 64 * 1024


def body_limit_for(max_upload_bytes: int, max_file_bytes: int) -> int:
    """Largest body accepted: a base64 upload of ``max_upload_bytes`` in JSON, or a raw file."""
    return max(4 * ((max_upload_bytes + 2) // 3) + JSON_OVERHEAD, max_file_bytes + JSON_OVERHEAD)


class BodyLimit(_StreamLimit):
    """The middleware (see the module docstring); ``limit`` is read per request (None: no limit)."""

    def __init__(self, app: ASGIApp, limit: Callable[[Scope], int | None]) -> None:
        super().__init__(app, limit)

    def too_large(self, limit: int) -> Exception:
        return HTTPException(413, f"the request body exceeds {limit} bytes")
