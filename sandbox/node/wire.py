"""The data plane's wire format: step answers and typed error answers, as the control plane shapes them.

An answer to a step is ``{"seq", "observation", "reward", "terminated", "truncated", "info"}`` (plus
``"replayed": true`` when it is the recorded answer of a step already applied); a reset's is
``{"observation", "info"}``. An error is ``{"error": {"code", "message", "details"}, "status": N}``
with the HTTP status the control plane's routes give the same error (``api/server/errors.py``), so a
client handles both planes alike. :func:`dumps` and :func:`loads` are the data plane's JSON codec
(orjson where installed, the ``json`` module otherwise), shared with the sandbox channel.
"""

from __future__ import annotations

from typing import TypedDict

from rockroll.envhub.errors import UnknownEnvError
from rockroll.envs.errors import ActionTypeError, EnvError, ResetNeeded
from rockroll.envs.json_types import JSONObject, JSONValue
from rockroll.sandbox import errors as sb
from rockroll.sandbox.node.sequence import SequenceError
from rockroll.sandbox.node.tokens import TokenRejected
from rockroll.sandbox.server.wire import dumps, loads

__all__ = [
    "NodeSessionNotFound", "WireError", "dumps", "error_answer", "loads", "replayed", "reset_answer", "step_answer",
]  # fmt: skip


class NodeSessionNotFound(sb.SandboxError, LookupError):
    """The agent holds no such session for this token's owner (the data plane's 404)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r} on this node")
        self.session_id = session_id


class ErrorBody(TypedDict):
    code: str
    message: str
    details: JSONObject


class ErrorAnswer(TypedDict):
    """An error on the data plane: its body and the HTTP status the control plane gives the same error."""

    error: ErrorBody
    status: int


class WireError(sb.SandboxError, ValueError):
    """A malformed message or request (the data plane's 4xx, ``status`` and ``code`` given)."""

    def __init__(self, status: int, code: str, message: str, details: JSONObject | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.details: JSONObject = details or {}


def _items(out: object, n: int, what: str) -> list[JSONValue]:
    """``out`` (an env's tuple, or the list a sandbox answered) as its ``n`` values; ValueError otherwise."""
    if not isinstance(out, (list, tuple)) or len(out) != n:
        raise ValueError(f"a {what} answers {n} values, got {type(out).__name__}")
    return list(out)


def step_answer(out: object, seq: int) -> JSONObject:
    """The answer to step number ``seq`` that played ``out``: ``(obs, reward, terminated, truncated, info)``."""
    obs, reward, terminated, truncated, info = _items(out, 5, "step")
    return {"seq": seq, "observation": obs, "reward": reward, "terminated": terminated, "truncated": truncated,
            "info": info}  # fmt: skip


def reset_answer(out: object) -> JSONObject:
    """The answer to a reset that gave ``out``: ``(obs, info)``."""
    obs, info = _items(out, 2, "reset")
    return {"observation": obs, "info": info}


def replayed(answer: JSONObject) -> JSONObject:
    """A recorded step's answer, sent again."""
    return answer | {"replayed": True}


def _status(e: BaseException) -> tuple[int, str, JSONObject]:
    if isinstance(e, WireError):
        return e.status, e.code, dict(e.details)
    if isinstance(e, TokenRejected):
        return 401, e.code, {}
    if isinstance(e, NodeSessionNotFound):
        return 404, "session_not_found", {"session_id": e.session_id}
    if isinstance(e, SequenceError):
        return 409, e.code, {"session_id": e.session_id, "got": e.got, "expected": e.expected}
    if isinstance(e, sb.SandboxLost):
        return 410, "sandbox_lost", {"sandbox_id": e.sandbox_id, "reason": e.reason}
    if isinstance(e, sb.SessionNotFound):
        return 410, "sandbox_lost", {}
    if isinstance(e, sb.SandboxTimeout):
        return 504, "sandbox_timeout", {}
    if isinstance(e, sb.CapacityError):
        return 429, "capacity_reached", {"active": e.active, "limit": e.limit, "what": e.what}
    if isinstance(e, UnknownEnvError):
        return 404, "env_not_found", {"env_id": e.env_id}
    if isinstance(e, ResetNeeded):
        return 409, "reset_needed", {}
    if isinstance(e, ActionTypeError):  # e.g. tool calls for a text env: the control plane's answer to it
        return 400, "invalid_env_input", {"field": str(getattr(e, "field", "action"))}
    if isinstance(e, (EnvError, sb.RemoteError)):
        return 400, "env_error", {}
    if isinstance(e, sb.SandboxError):
        return 503, "sandbox_error", {}
    if isinstance(e, (ValueError, TypeError, KeyError)):
        return 400, "bad_request", {}
    return 500, "internal_error", {}


def error_answer(e: BaseException) -> ErrorAnswer:
    """``{"error": {"code", "message", "details"}, "status": N}`` for ``e``."""
    status, code, details = _status(e)
    message = str(e) if status != 500 else f"{type(e).__name__}: {e}"
    return {"error": {"code": code, "message": message, "details": details}, "status": status}
