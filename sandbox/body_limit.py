"""Request bodies read under a limit: refused with 413 while they are read, never buffered whole first.

Two readers, one per kind of server in the sandbox layer:

* :class:`BodyLimit`, an ASGI middleware (the node agent's Starlette app; the control plane's
  :class:`rockroll.api.server.body_limit.BodyLimit` is one): a ``Content-Length`` over the limit (or
  not a number) is answered at once, no byte of the body read; a body without a length (chunked) is
  counted as the app reads it: as soon as it passes the limit the request is answered ``413
  too_large`` (the connection closed, the rest unread) and the app's read raises
  :class:`BodyTooLarge` (whatever the app answers then is dropped). An answer the app begins before
  it has read the body to its end (a refusal: 401, 404) closes the connection, so the server never
  drains the unread rest (unless it is declared at most :data:`DRAIN_BYTES` long).
  :func:`read_limited` reads a Starlette request's body under a limit of its own (a route that
  must hold even where no middleware wraps it), optionally vetting its first bytes before reading on.
* :func:`read_body` (the in-sandbox server's ``http.server`` handler): ``Content-Length`` checked
  up front, ``Transfer-Encoding: chunked`` decoded chunk by chunk and cut at the limit.

Threat model: whoever can reach the server is untrusted (the node agent listens on the network
with unauthenticated routes); no reader holds more than ``limit`` bytes of one request.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from email.message import Message as Headers
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyError", "BodyTooLarge", "BodyLimit", "read_limited", "read_body"]

MAX_CHUNK_LINE = 1024
"""The longest chunk-size line (with its extensions) or trailer line of a chunked body."""
MAX_TRAILERS = 64
DRAIN_BYTES = 4096
"""An answer begun before the body was read keeps the connection (the server drops the rest) only for a
body declared at most this long; a longer or chunked one closes it."""
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
    """The ASGI middleware (see the module docstring): bodies of ``http`` requests up to ``limit`` bytes.

    ``limit`` is a number, or a function of the request's scope (None: no limit for that request).
    """

    def __init__(self, app: ASGIApp, limit: int | Callable[[Scope], int | None]) -> None:
        self.app = app
        self.limit = limit

    def too_large(self, limit: int) -> Exception:
        """What the app's read raises past the limit (the 413 has gone out already)."""
        return BodyTooLarge(limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = None if scope["type"] != "http" else self.limit(scope) if callable(self.limit) else self.limit
        if limit is None:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        try:
            length = _content_length(headers.get(b"content-length"))
            if length is not None and length > limit:
                raise BodyTooLarge(limit)
        except BodyError as e:
            await refuse(send, e)
            return
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        stream = _Stream(receive, send, limit, self.too_large, has_body=chunked or (length or 0) > DRAIN_BYTES)
        try:
            await self.app(scope, stream.receive, stream.send)
        except BodyTooLarge:
            if not stream.started:
                await stream.refuse()


class _Stream:
    """One request's body, counted as the app reads it, and its answer: a 413 at the first byte past the
    limit; an answer begun before the body was read to its end closes the connection (never drained)."""

    def __init__(
        self, receive: Receive, send: Send, limit: int, error: Callable[[int], Exception], *, has_body: bool
    ) -> None:
        self._receive, self._send, self.limit, self.error = receive, send, limit, error
        self.seen = 0
        self.ended = not has_body  # the app read the body to its end (or it is short enough to drain)
        self.started = self.refused = False

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.seen += len(message.get("body", b""))
            self.ended = not message.get("more_body", False)
            if self.seen > self.limit:
                await self.refuse()  # at once: the rest of the body is never read
                raise self.error(self.limit)
        return message

    async def refuse(self) -> None:
        """Answer 413 (and close), unless an answer has begun; the app's own answer is dropped then."""
        if not self.started:
            self.started = self.refused = True
            await refuse(self._send, BodyTooLarge(self.limit))

    async def send(self, message: Message) -> None:
        if self.refused:
            return
        if message["type"] == "http.response.start":
            self.started = True
            if not self.ended:  # the server would read (drain) the unread rest to keep the connection
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*kept, (b"connection", b"close")]}
        await self._send(message)


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


async def read_limited(
    request: Request, limit: int, *, head: int = 0, vet: Callable[[bytes], None] | None = None
) -> bytes:
    """The body of a Starlette ``request``, read chunk by chunk; :class:`BodyTooLarge` past ``limit``.

    ``vet`` (when given) is called once with the body's first ``head`` bytes (the whole body when it is
    shorter), before any more is read; what it raises stops the read.
    """
    length = _content_length(request.headers.get("content-length"))
    if length is not None and length > limit:
        raise BodyTooLarge(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge(limit)
        if vet is not None and len(body) >= head:
            vet(bytes(body[:head]))
            vet = None
    if vet is not None:
        vet(bytes(body))
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
