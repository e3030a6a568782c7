"""What guards ``rockroll serve-model``: an API key, a request-body limit, and stopping the work of a
client that left.

:class:`ServeGuard` is an ASGI middleware. With an API key set (``--api-key`` or
``$ROCKROLL_MODEL_API_KEY``), every route but ``/health`` needs ``Authorization: Bearer KEY`` (what
OpenAI clients send as ``api_key``); a missing or wrong key is OpenAI's 401 ``invalid_api_key``.
A body whose ``Content-Length`` exceeds the limit is answered 413 at once, without reading it; a
body without a length is counted while it is read and refused as soon as it passes the limit.

:func:`until_disconnected` runs a handler's work while polling whether its client is still
there: a client that leaves (closes the connection, times out) cancels the work, and with it the
engine requests (the hf engine drops a request whose caller was cancelled at its next step).

With episode keys (a :class:`~rockroll.agentrl.serving.recording.CallRecorder`: the model service of agent
episodes), a request may instead carry an open episode's key: it is served as that episode's (and recorded);
a key of an episode that ended, or no key, is the same 401. The operator's key, where one is set, still works.

Threat model: the key keeps strangers on the network from spending the model's compute; an episode key
reaches only its own episode's record and dies with the episode. Use TLS in front of it beyond localhost.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "API_KEY_ENV", "MAX_BODY_BYTES", "EPISODE_STATE", "EpisodeKeys", "ServeGuard", "ClientGone", "until_disconnected",
]  # fmt: skip

API_KEY_ENV = "ROCKROLL_MODEL_API_KEY"
MAX_BODY_BYTES = 8 * 1024 * 1024
POLL_S = 0.2  # how often a waiting handler asks whether its client is still there
OPEN_PATHS = ("/health",)

T = TypeVar("T")
EPISODE_STATE = "rockroll_episode"  # where an episode key's request carries its episode id (``scope["state"]``)


class EpisodeKeys(Protocol):
    """What the guard needs of :class:`~rockroll.agentrl.serving.recording.CallRecorder`."""

    def episode_of(self, key: str) -> str | None: ...


class ClientGone(Exception):
    """The client closed the connection before its answer was ready (nothing is sent)."""


def _error(status: int, message: str, code: str, kind: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


class ServeGuard:
    """The middleware (see the module docstring). ``api_key`` None or empty: no authentication."""

    def __init__(
        self, app: ASGIApp, api_key: str | None = None, max_body_bytes: int = MAX_BODY_BYTES,
        episodes: EpisodeKeys | None = None,
    ) -> None:  # fmt: skip
        self.app = app
        self.key = (api_key or "").encode()
        self.limit = max_body_bytes
        self.episodes = episodes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        guarded = bool(self.key) or self.episodes is not None
        if guarded and scope.get("path") not in OPEN_PATHS and not self._authorized(headers, scope):
            given = b"authorization" in headers
            message = (
                "Incorrect API key provided."
                if given
                else "You didn't provide an API key. Send it as "
                "'Authorization: Bearer KEY' (the api_key of an OpenAI client)."
            )
            body = _error(401, message, "invalid_api_key", "invalid_request_error")
            await _reply(send, 401, body, [(b"www-authenticate", b"Bearer")])
            return
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await _reply(send, 413, _error(413, self._too_large(), "too_large", "invalid_request_error"))
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, self._too_large())
            return message

        await self.app(scope, counted, send)

    def _authorized(self, headers: dict[bytes, bytes], scope: Scope) -> bool:
        """The operator's key, or an open episode's (named in ``scope["state"]["rockroll_episode"]``)."""
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        token = token.strip()
        if self.key and hmac.compare_digest(token, self.key):
            return True
        episode = self.episodes.episode_of(token.decode(errors="replace")) if self.episodes is not None else None
        if episode is None:
            return False
        scope.setdefault("state", {})[EPISODE_STATE] = episode
        return True

    def _too_large(self) -> str:
        return f"the request body exceeds {self.limit} bytes"


async def _reply(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def until_disconnected(request: Any, work: Awaitable[T]) -> T:
    """``await work``, cancelled (raising :class:`ClientGone`) when ``request``'s client leaves first."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise ClientGone()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
