"""The wire between the control plane and a job worker: JSON lines over the worker's stdin and stdout.

Worker -> server (``t``): ``log`` (``line``), ``report`` (``progress``, ``metrics``), ``rpc`` (``id``,
``op``, ``args``: an env-session call the server runs in its sandboxes), and one end message: ``done``
(``metrics``), ``cancelled`` or ``failed`` (``error``). Server -> worker: ``start`` (``job_id``,
``kind``, ``config``), ``reply`` (``id`` and ``result`` or ``error``) and ``cancel``.

The worker is less trusted than the server: the server reads its lines with a size limit, as JSON
only (never pickle), and checks every field it uses (:func:`decode`, :func:`clean_metrics`).
Errors travel as ``{"type", "message", "attrs"}`` and are rebuilt in the worker as the same class when
it is one of the sandbox, env or API errors (so a rollout still tells a lost sandbox from a bad action).
"""

from __future__ import annotations

import json
import math
from typing import Any, TypedDict

from rockroll.api.server.errors import ApiError, RockrollError
from rockroll.envs import errors as env_errors
from rockroll.envs.json_types import JSONObject, JSONScalar
from rockroll.sandbox import errors as sb_errors
from rockroll.sandbox.server.wire import ErrorInfo

__all__ = [
    "MAX_LINE",
    "Cancelled",
    "ProtocolError",
    "encode",
    "decode",
    "error_to_dict",
    "error_from_dict",
    "clean_metrics",
]

#: the longest line either side sends (an observation or env state can be large)
MAX_LINE = 64 * 1024 * 1024
#: most metric names a job keeps; longer text values are cut
MAX_METRICS, MAX_METRIC_TEXT = 256, 1_000


class ProtocolError(ValueError):
    """A line from the worker that is not a well-formed message."""


class Cancelled(RockrollError):
    """Raised inside a job (by ``ctx.check()``) once it was cancelled."""


#: a job's metrics as recorded: text keys with numbers, flags, short text or null
Metrics = dict[str, JSONScalar]


class ProxiedSession(TypedDict):
    """An env session the server holds for a job's worker (``sid``: its handle in this job), as ``open`` and
    ``fork`` answer it."""

    sid: str
    sandbox_id: str
    session_id: str
    env_id: str
    system_prompt: str
    tools: list[dict[str, Any]]  # the env's tools, OpenAI function schemas


def encode(msg: dict[str, object]) -> bytes:
    return json.dumps(msg, separators=(",", ":"), default=str).encode() + b"\n"


def decode(line: bytes) -> JSONObject:
    """One message (a JSON object with a text ``t``, or a ``reply``), or :class:`ProtocolError`."""
    if len(line) > MAX_LINE or not line.endswith(b"\n"):
        raise ProtocolError("a message line is too long or cut short")
    try:
        msg = json.loads(line)
    except ValueError as e:
        raise ProtocolError(f"not JSON: {e}") from e
    if not isinstance(msg, dict) or not isinstance(msg.get("t"), str):
        raise ProtocolError("a message must be a JSON object with a text 't'")
    return msg


def clean_metrics(metrics: object) -> Metrics:
    """What a job may record as metrics: at most :data:`MAX_METRICS` text keys with numbers, flags or short text."""
    if not isinstance(metrics, dict):
        return {}
    out: Metrics = {}
    for k, v in metrics.items():
        if len(out) >= MAX_METRICS:
            break
        if not isinstance(k, str) or len(k) > 200:
            continue
        if isinstance(v, float) and not math.isfinite(v):
            out[k] = None if math.isnan(v) else v
        elif isinstance(v, (bool, int, float)) or v is None:
            out[k] = v
        elif isinstance(v, str):
            out[k] = v[:MAX_METRIC_TEXT]
    return out


_CLASSES: dict[str, type[Exception]] = {
    name: obj
    for mod in (sb_errors, env_errors)
    for name, obj in vars(mod).items()
    if isinstance(obj, type) and issubclass(obj, Exception)
}
_CLASSES["ApiError"] = ApiError


def error_to_dict(e: BaseException) -> ErrorInfo:
    """An exception as ``{"type", "message", "attrs"}`` (its plain attributes only)."""
    attrs: dict[str, object] = {k: v for k, v in vars(e).items() if isinstance(v, (str, int, float, bool, type(None)))}
    return {"type": type(e).__name__, "message": str(e), "attrs": attrs}


def error_from_dict(d: object) -> Exception:
    """The exception :func:`error_to_dict` described: the same class for sandbox, env and API errors."""
    if not isinstance(d, dict):
        return sb_errors.RemoteError("Error", str(d))
    name, message = str(d.get("type", "Error")), str(d.get("message", ""))
    cls = _CLASSES.get(name)
    if cls is None:
        return sb_errors.RemoteError(name, message)
    e = cls.__new__(cls)
    Exception.__init__(e, message)
    attrs = d.get("attrs")
    for k, v in attrs.items() if isinstance(attrs, dict) else ():
        try:
            setattr(e, str(k), v)
        except AttributeError:
            pass
    if isinstance(e, ApiError) and not isinstance(getattr(e, "details", None), dict):
        e.details = {}
    return e
