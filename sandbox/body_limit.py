"""Request bodies read under a limit: refused with 413 while they are read, never buffered whole first.

Two readers, one per kind of server in the sandbox layer:

* :class:`BodyLimit`, an ASGI middleware (the node agent's Starlette app): a ``Content-Length`` over
  the limit (or not a number) is answered at once, no byte of the body read; a body without a length
  (chunked) is counted as the app reads it: as soon as it passes the limit the request is answered
  ``413 too_large`` (the connection closed, the rest unread) and the app's read raises
  :class:`BodyTooLarge` (whatever the app answers then is dropped).
  :func:`read_limited` reads a Starlette request's body under a limit of its own (a route that
  must hold even where no middleware wraps it).
* :func:`read_body` (the in-sandbox server's ``http.server`` handler): ``Content-Length`` checked
  up front, ``Transfer-Encoding: chunked`` decoded chunk by chunk and cut at the limit.

Threat model: whoever can reach the server is untrusted (the node agent listens on the network
with unauthenticated routes); no reader holds more than ``limit`` bytes of one request.
"""

from __future__ import annotations

import json
import string
from email.message import Message as Headers
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyError", "BodyTooLarge", "BodyLimit", "read_limited", "read_body"]

MAX_CHUNK_LINE = 1024
"""The longest chunk-size line (with its extensions) or trailer line of a chunked body."""
MAX_TRAILERS = 64
_HEX = frozenset(string.hexdigits.encode())


class Reader(Protocol):
    """What :func:`read_body` reads from: an ``http.server`` handler's ``rfile``."""

    def read(self, n: int, /) -> bytes: ...

    def readline(self, limit: int, /) -> bytes: ...


class BodyError(ValueError):
    """A request body refused: HTTP ``status`` (400 malformed, 413 too large), ``code`` and a message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class BodyTooLarge(BodyError):
    """A request body over ``limit`` bytes (413 ``too_large``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, "too_large", f"the request body exceeds {limit} bytes")
        self.limit = limit


def _content_length(headers: bytes | str | None) -> int | None:
    """The declared length (None: none declared); :class:`BodyError` when it is not a number."""
    if headers is None:
        return None
    raw = headers.strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise BodyError(400, "bad_request", "Content-Length must be a number of bytes")
    return int(raw)


class BodyLimit:
    """The ASGI middleware (see the module docstring): bodies of ``http`` requests up to ``limit`` bytes."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit
        try:
            length = _content_length(dict(scope.get("headers") or []).get(b"content-length"))
            if length is not None and length > limit:
                raise BodyTooLarge(limit)
        except BodyError as e:
            await refuse(send, e)
            return
        seen, state = 0, {"started": False, "refused": False}

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    if not state["started"]:  # answered here, whatever the app makes of the error
                        state["started"] = state["refused"] = True
                        await refuse(send, BodyTooLarge(limit))
                    raise BodyTooLarge(limit)
            return message

        async def tracked_send(message: Message) -> None:
            if state["refused"]:  # the app's own answer to the error: the 413 went out already
                return
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, counted, tracked_send)
        except BodyTooLarge:
            if not state["started"]:
                state["started"] = True
                await refuse(send, BodyTooLarge(limit))


async def refuse(send: Send, e: BodyError) -> None:
    """Answer ``e`` as ``{"error": {"code", "message", "details"}}`` and close the connection."""
    details = {"limit": e.limit} if isinstance(e, BodyTooLarge) else {}
    body = json.dumps({"error": {"code": e.code, "message": str(e), "details": details}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": e.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def read_limited(request: Request, limit: int) -> bytes:
    """The body of a Starlette ``request``, read chunk by chunk; :class:`BodyTooLarge` past ``limit``."""
    length = _content_length(request.headers.get("content-length"))
    if length is not None and length > limit:
        raise BodyTooLarge(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge(limit)
    return bytes(body)


def read_body(rfile: Reader, headers: Headers, limit: int) -> bytes | bytearray:
    """The body of an ``http.server`` request (``headers``: its message), at most ``limit`` bytes."""
    coding = headers.get("Transfer-Encoding")
    if coding is not None:
        if coding.strip().lower() != "chunked":
            raise BodyError(400, "bad_request", f"unsupported Transfer-Encoding {coding!r}")
        return _read_chunked(rfile, limit)
    length = _content_length(headers.get("Content-Length"))
    if not length:
        return b""
    if length > limit:
        raise BodyTooLarge(limit)
    data = rfile.read(length)
    if len(data) < length:
        raise BodyError(400, "bad_request", "the request body ended before its Content-Length")
    return data


def _read_chunked(rfile: Reader, limit: int) -> bytearray:
    body = bytearray()
    while True:
        digits = _line(rfile).split(b";", 1)[0].strip()
        if not digits or not _HEX.issuperset(digits):
            raise BodyError(400, "bad_request", "a chunk size must be hexadecimal digits")
        size = int(digits, 16)
        if size == 0:
            break
        if len(body) + size > limit:
            raise BodyTooLarge(limit)
        chunk = rfile.read(size)
        if len(chunk) < size or _line(rfile) != b"":
            raise BodyError(400, "bad_request", "a chunk ended before its size or without CRLF")
        body += chunk
    for _ in range(MAX_TRAILERS):
        if _line(rfile) == b"":
            return body
    raise BodyError(400, "bad_request", f"more than {MAX_TRAILERS} trailer lines")


def _line(rfile: Reader) -> bytes:
    line = rfile.readline(MAX_CHUNK_LINE + 1)
    if len(line) > MAX_CHUNK_LINE or not line.endswith(b"\n"):
        raise BodyError(400, "bad_request", "a chunked body's line is too long or cut short")
    return line.rstrip(b"\r\n")
