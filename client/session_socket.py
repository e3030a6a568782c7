"""Client side of ``/v1/sessions/{id}/ws`` (see :mod:`rockroll.api.routes.session_ws`): one socket per session."""

from __future__ import annotations

import json
from typing import Any

from rockroll.client.errors import error_for

__all__ = ["SessionSocket"]


class SessionSocket:
    """A blocking WebSocket to one session; ``call({"op": ...})`` returns the answer or raises."""

    def __init__(self, url: str, token: str | None, session_id: str, *, timeout_s: float = 120.0) -> None:
        from websockets.sync.client import connect

        ws_url = "ws" + url.rstrip("/").removeprefix("http") + f"/v1/sessions/{session_id}/ws"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout_s = timeout_s
        self._cm = connect(ws_url, additional_headers=headers, open_timeout=timeout_s, max_size=64 * 1024 * 1024)
        self._ws = self._cm.__enter__()

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one message and return its answer (raise ``ApiClientError`` for an error answer).

        Never resent: a socket that drops raises (``websockets.ConnectionClosed``), since the
        server may have played the step already.
        """
        self._ws.send(json.dumps(message))
        answer = json.loads(self._ws.recv(timeout=self.timeout_s))
        if "error" in answer:
            raise error_for(int(answer.get("status", 400)), answer)
        return answer

    def close(self) -> None:
        """Close the socket."""
        self._cm.__exit__(None, None, None)
