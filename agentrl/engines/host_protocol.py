"""The pipe protocol between an engine client and its host process (vLLM's venv).

One frame: a 12-byte header ``<IQ`` (length of a UTF-8 JSON object, length of a binary payload),
the JSON object, then the payload (empty for most messages; safetensors bytes for a weight
update). Frames go one way per pipe: the client writes requests to the host's stdin, the host
writes replies to its stdout (the host moves Python's own stdout to stderr first, so library logs
cannot corrupt the stream).

Requests: ``{"id": int, "op": str, ...}``; ops: ``generate``, ``update_weights``,
``reset_prefix_cache``, ``sleep``, ``wake_up``, ``ping``, ``shutdown``. Replies:
``{"id": int, "ok": true, "result": {...}}`` or ``{"id": int, "ok": false, "error": str,
"kind": "request" | "control" | "engine"}`` (``engine``: the engine broke and the host exits).
The host sends ``{"id": 0, "ok": true, "result": {"ready": ...}}`` once the engine is built. Only JSON and bytes cross the pipe: no pickles.
"""

from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO

__all__ = ["HEADER", "read_frame", "write_frame", "ProtocolError"]

HEADER = struct.Struct("<IQ")
MAX_JSON = 64 * 1024 * 1024  # a prompt of a few million token ids fits


class ProtocolError(ValueError):
    """A malformed frame (the other side is not a rockroll host/client, or it broke mid-frame)."""


def _read_exact(stream: BinaryIO, n: int) -> bytes | None:
    chunks: list[bytes] = []
    got = 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            if got == 0:
                return None
            raise ProtocolError(f"stream ended inside a frame ({got} of {n} bytes)")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(stream: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    """The next ``(message, payload)`` from ``stream``; None at a clean end of stream."""
    head = _read_exact(stream, HEADER.size)
    if head is None:
        return None
    json_len, blob_len = HEADER.unpack(head)
    if json_len > MAX_JSON:
        raise ProtocolError(f"frame header announces {json_len} bytes of JSON (limit {MAX_JSON})")
    body = _read_exact(stream, json_len) or b""
    blob = (_read_exact(stream, blob_len) or b"") if blob_len else b""
    if len(body) != json_len or len(blob) != blob_len:
        raise ProtocolError("stream ended inside a frame")
    try:
        message = json.loads(body)
    except ValueError as e:
        raise ProtocolError(f"frame is not JSON: {body[:200]!r}") from e
    if not isinstance(message, dict):
        raise ProtocolError(f"frame is not a JSON object: {body[:200]!r}")
    return message, blob


def write_frame(stream: BinaryIO, message: dict[str, Any], blob: bytes = b"") -> None:
    """Write one frame and flush (callers serialise writers themselves)."""
    body = json.dumps(message, separators=(",", ":")).encode()
    stream.write(HEADER.pack(len(body), len(blob)))
    stream.write(body)
    if blob:
        stream.write(blob)
    stream.flush()
