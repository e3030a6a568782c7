"""The in-sandbox server's wire: its answers and errors, the JSON codec, the WebSocket helpers of its channel.

A call's answer is ``{"result": ...}`` or ``{"error": {"type", "message", "attrs"}}`` (:class:`Answer`), on the
HTTP socket (:mod:`rockroll.sandbox.server.app`) and on the channel (:mod:`rockroll.sandbox.server.channel`)
alike; an error names the exception's class and carries its plain attributes, so the host raises it again
typed (:func:`rockroll.sandbox.client._to_exception`). ``env.make`` and ``env.fork`` answer an
:class:`OpenedSession`. :func:`dumps` and :func:`loads` are the channel's JSON codec (orjson where
installed), shared with the node agent's data plane; :func:`send_pending` and :func:`whole_message` drive the ``websockets``
library's sans-I/O protocol objects on both ends of the channel.

Split from :mod:`rockroll.sandbox.server.channel`. Light: no env library, no ``websockets`` import at run time.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, NotRequired, TypedDict

from rockroll.envs.json_types import JSONValue

if TYPE_CHECKING:
    from websockets.frames import Frame
    from websockets.protocol import Protocol

__all__ = [
    "Answer",
    "ErrorAnswer",
    "ErrorInfo",
    "FileEntry",
    "OpenedSession",
    "ResultAnswer",
    "bad_request",
    "dumps",
    "error_info",
    "loads",
    "send_pending",
    "whole_message",
]


class ErrorInfo(TypedDict):
    """A failed call: the exception's class name, its message and its plain attributes."""

    type: str
    message: str
    attrs: dict[str, object]


class ResultAnswer(TypedDict):
    result: object


class ErrorAnswer(TypedDict):
    error: ErrorInfo


#: the answer to one call
Answer = ResultAnswer | ErrorAnswer


class FileEntry(TypedDict):
    """One entry of ``files.list``."""

    name: str
    type: str  # file | dir | link
    size: int


class OpenedSession(TypedDict):
    """A session that was opened (``env.make``, ``env.fork``; a node agent's open answers one too)."""

    session_id: str
    env_id: NotRequired[str]
    system_prompt: NotRequired[str]
    sandbox_id: NotRequired[str]  # where the answer knows it (a node agent's)
    tools: NotRequired[list[dict[str, JSONValue]]]  # the env's tools as OpenAI function schemas (absent: none)


def error_info(e: BaseException) -> ErrorInfo:
    """``e`` as the wire carries it: its plain attributes only (strings, numbers, lists, None)."""
    attrs: dict[str, object] = {
        k: v for k, v in vars(e).items() if isinstance(v, (str, int, float, bool, list, type(None)))
    }
    return {"type": type(e).__name__, "message": str(e), "attrs": attrs}


def bad_request(message: str) -> ErrorAnswer:
    """The answer to a malformed call."""
    return {"error": {"type": "BadRequest", "message": message, "attrs": {}}}


_encode = json.JSONEncoder(separators=(",", ":")).encode

try:  # a faster codec where the image has it; the json module's text otherwise
    import orjson
except ImportError:  # pragma: no cover - an image without orjson
    _ORJSON = False
else:
    _ORJSON = True


def dumps(payload: object) -> bytes:
    """Compact JSON (UTF-8 bytes), written by orjson where it can (it writes NaN as null), else by ``json``."""
    if _ORJSON:
        try:
            return orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # what orjson does not write (an int past 64 bits...): as the json module writes it
            pass
    return _encode(payload).encode()


def loads(data: str | bytes) -> JSONValue:
    """Parse JSON (orjson where it can; the json module's dialect, NaN included, otherwise); ValueError when bad,
    nested too deep included (the json module's RecursionError is no crash of the caller)."""
    if _ORJSON:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(data)
    except RecursionError as e:
        raise ValueError("JSON nested too deeply") from e


def send_pending(proto: Protocol, transport: asyncio.WriteTransport) -> None:
    """Write what a sans-I/O WebSocket protocol object has to send; its end of stream half-closes."""
    for data in proto.data_to_send():
        if data:
            transport.write(data)
        elif transport.can_write_eof():
            transport.write_eof()


_DATA_OPCODES = frozenset({0, 1, 2})
"""The opcodes of data frames: continuation, text, binary (``websockets.frames.Opcode``)."""


def whole_message(frame: Frame, parts: list[bytes]) -> bytes | None:
    """The message ``frame`` completes (its earlier fragments are kept in ``parts``); None while one is
    incomplete, and for control frames (ping, pong, close: the protocol object answers those)."""
    if frame.opcode.value not in _DATA_OPCODES:
        return None
    if not frame.fin:
        parts.append(bytes(frame.data))
        return None
    data = frame.data.tobytes() if isinstance(frame.data, memoryview) else bytes(frame.data)
    if not parts:
        return data
    message = b"".join([*parts, data])
    parts.clear()
    return message
