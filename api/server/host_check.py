"""Dev mode answers only requests that name a local host (defence against DNS rebinding).

A dev-mode server needs no token, so any process that reaches 127.0.0.1 may use it; a loopback bind
keeps other machines out. A web page can still get in through the victim's browser: it rebinds its
own name (``evil.example``) to 127.0.0.1 and calls ``http://evil.example:8080/v1/...``, which the
browser treats as same-origin. Such a request carries ``Host: evil.example:8080``: answering only
the names in ``Settings.dev_hosts`` (localhost, 127.0.0.1, ::1 by default, any port) refuses it, with
400 ``bad_host`` for HTTP and a close (1008) before the handshake completes for a WebSocket.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from rockroll.api.server.errors import error_body

__all__ = ["DevHostCheck", "host_name"]


def host_name(header: str) -> str:
    """The name part of a ``Host`` header (lower case, port and IPv6 brackets removed)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else ""
    name, sep, port = header.rpartition(":")
    return name if sep and port.isdigit() else header


class DevHostCheck:
    """ASGI middleware: requests whose ``Host`` is not one of ``hosts`` are refused."""

    def __init__(self, app: ASGIApp, hosts: list[str]) -> None:
        self.app = app
        self.hosts = frozenset(h.strip("[]").lower() for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        raw = dict(scope.get("headers") or ()).get(b"host", b"")
        if host_name(raw.decode("latin-1")) in self.hosts:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "bad_host"})
            return
        message = "this development server only answers requests to localhost, 127.0.0.1 or [::1]"
        body = json.dumps(error_body("bad_host", message, {"allowed": sorted(self.hosts)})).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})
