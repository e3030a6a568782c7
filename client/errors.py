"""Errors of the API's clients: an error answer ``{"error": {"code", "message", "details"}}`` raises
:class:`ApiClientError` (:class:`SandboxLostError` for ``sandbox_lost`` and ``session_lost``), over HTTP
(:mod:`rockroll.client.sdk`) and over a session's WebSocket (:mod:`rockroll.client.session_socket`) alike.
"""

from __future__ import annotations

from typing import Any

from rockroll.sandbox.errors import SandboxLost, StatusError

__all__ = ["ApiClientError", "SandboxLostError", "error_for"]


class ApiClientError(StatusError):
    """An error answer of the API: ``status``, ``code``, ``message`` and ``details`` (see :class:`StatusError`)."""


class SandboxLostError(ApiClientError, SandboxLost):
    """The session's sandbox died (``sandbox_lost``), or the node agent hosting it did
    (``session_lost``, reason ``node_lost``): open a new session.

    Also a :class:`rockroll.sandbox.errors.SandboxLost` (the one "sandbox lost" type), with its
    ``sandbox_id`` and ``reason`` taken from the answer's details.
    """

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(status, code, message, details)
        self.sandbox_id = str(self.details.get("sandbox_id", ""))
        self.reason = str(self.details.get("reason", message))


#: error codes meaning the session is gone with what hosted it (a sandbox, a node agent)
LOST_CODES = ("sandbox_lost", "session_lost")


def error_for(status: int, body: Any, text: str = "") -> ApiClientError:
    """The exception for an error answer with HTTP ``status`` and JSON ``body`` (``text``: the raw body, if not JSON)."""
    try:
        err = body["error"]
        code, message, details = str(err["code"]), str(err["message"]), err.get("details") or {}
    except (KeyError, TypeError, AttributeError):
        code, message, details = "http_error", text[:500], {}
    cls = SandboxLostError if code in LOST_CODES else ApiClientError
    return cls(status, code, message, details)
