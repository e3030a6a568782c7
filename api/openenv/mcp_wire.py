"""MCP's JSON-RPC shapes for a rockroll tool env: the messages ``/mcp`` reads and the answers it writes.

MCP (the Model Context Protocol) is JSON-RPC 2.0: a request ``{"jsonrpc": "2.0", "id", "method", "params"}``
is answered ``{"jsonrpc": "2.0", "id", "result"}`` or ``{..., "error": {"code", "message", "data"}}``; a
notification has no ``id`` and no answer. :func:`read_message` checks a POST's body (``RpcError`` with
JSON-RPC's code for a bad one: ``-32700`` not JSON, ``-32600`` not a request); the other functions build
the answers of ``initialize``, ``tools/list`` and ``tools/call``:

* an env :class:`~rockroll.envs.tools.Tool` is an MCP tool ``{"name", "description", "inputSchema"}``, its
  ``parameters`` the input schema;
* a call's :class:`~rockroll.envs.tools.ToolResult` is a ``CallToolResult``: ``content`` one text block
  (the result's content), ``isError`` its error flag, and ``_meta`` the step around it (``rockroll/observation``,
  ``rockroll/reward``, ``rockroll/terminated``, ``rockroll/truncated``, ``rockroll/info``).

Pure functions of plain data: the transport and the sessions are :mod:`rockroll.api.openenv.mcp_http`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rockroll.envs.tools import Tool

__all__ = [
    "PROTOCOL_VERSIONS",
    "SESSION_HEADER",
    "VERSION_HEADER",
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "SERVER_ERROR",
    "RpcError",
    "Message",
    "read_message",
    "message_of",
    "rpc_result",
    "rpc_error",
    "negotiate",
    "mcp_tool",
    "initialize_result",
    "call_result",
    "ended_result",
]

#: the MCP revisions served, oldest to newest (all reached through the ``initialize`` handshake)
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
#: an error of the env or the control plane (``data``: rockroll's ``status``, ``reason`` and ``details``)
SERVER_ERROR = -32000
_METHOD_CHARS = 200


class RpcError(Exception):
    """A JSON-RPC error to answer (``code``: one of this module's codes; ``request_id``: the id of a request
    read that far)."""

    def __init__(
        self, code: int, message: str, data: dict[str, Any] | None = None, *, request_id: str | int | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.data, self.request_id = code, message, data, request_id


@dataclass(frozen=True)
class Message:
    """A JSON-RPC request (``id`` a string or an integer) or notification (``id`` None)."""

    method: str
    id: str | int | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def is_notification(self) -> bool:
        return self.id is None


def _valid_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def read_message(body: bytes) -> Message | None:
    """The message of a POST body; None for a JSON-RPC response (the client answering a request of ours)."""
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise RpcError(PARSE_ERROR, "Parse error: the body is not JSON") from e
    return message_of(raw)


def message_of(raw: object) -> Message | None:
    """:func:`read_message` of decoded JSON (a WebSocket ``mcp`` frame's ``data``)."""
    if isinstance(raw, list):
        raise RpcError(INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not taken, send one message a POST")
    if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'Invalid Request: a message is an object with "jsonrpc": "2.0"')
    if "method" not in raw and ("result" in raw or "error" in raw):
        return None
    method, params = raw.get("method"), raw.get("params", {})
    if not isinstance(method, str) or not method or len(method) > _METHOD_CHARS:
        raise RpcError(INVALID_REQUEST, "Invalid Request: method must be a name (text)")
    if "id" in raw and not _valid_id(raw["id"]):
        raise RpcError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object", request_id=raw.get("id"))
    return Message(method, raw.get("id"), params)


def rpc_result(request_id: str | int | None, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(request_id: Any, code: int, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC error answer (``id`` null where the request's was unreadable)."""
    rid = request_id if _valid_id(request_id) else None
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def negotiate(asked: object) -> str:
    """The revision to speak: the client's when served, else the newest (the client then decides)."""
    return asked if isinstance(asked, str) and asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]


def mcp_tool(tool: Tool) -> dict[str, Any]:
    """An env's tool as MCP lists it."""
    return {"name": tool.name, "description": tool.description, "inputSchema": dict(tool.parameters)}


def initialize_result(
    version: str, env_id: str, instructions: str, meta: dict[str, Any], server_version: str
) -> dict[str, Any]:
    """The ``initialize`` answer: only tools are served (no resources, prompts or logging)."""
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "rockroll", "title": f"rockroll env {env_id}", "version": server_version},
        "instructions": instructions,
        "_meta": meta,
    }


def call_result(
    call_id: str, obs: str, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
) -> dict[str, Any]:
    """The ``tools/call`` answer of one step with the single call ``call_id``."""
    results = [r for r in info.get("tool_results") or () if isinstance(r, dict)]
    mine = next((r for r in results if r.get("tool_call_id") == call_id), results[0] if results else None)
    text, is_error = (str(mine.get("content", "")), bool(mine.get("error"))) if mine else (obs, False)
    meta = {
        "rockroll/observation": obs,
        "rockroll/reward": reward,
        "rockroll/terminated": terminated,
        "rockroll/truncated": truncated,
        "rockroll/info": {k: v for k, v in info.items() if k != "tool_results"},
    }
    return {"content": [{"type": "text", "text": text}], "isError": is_error, "_meta": meta}


def ended_result() -> dict[str, Any]:
    """The ``tools/call`` answer once the episode is over: not run, an error result saying so."""
    text = (
        "not run: the episode has ended (or was never reset). Over /mcp, end this session (DELETE /mcp) and "
        "initialize a new one for another episode; over /ws, send a reset."
    )
    return {"content": [{"type": "text", "text": text}], "isError": True, "_meta": {"rockroll/episode_over": True}}
