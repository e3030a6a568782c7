"""``/openenv/<env id>/mcp``: a tool env's tools over MCP's Streamable HTTP transport, one episode a session.

An MCP client (``mcp.client.streamable_http``'s ``streamable_http_client`` + ``mcp.ClientSession``, any host that
speaks MCP over HTTP) plays an episode of the env by calling its tools. Revisions 2024-11-05 to 2025-11-25 are
served (:data:`~rockroll.api.openenv.mcp_wire.PROTOCOL_VERSIONS`); every answer is one ``application/json``
body (never an SSE stream), which the transport allows and clients take.

* ``POST /mcp`` ``initialize`` opens one rockroll session on the env and resets it: the episode's **seed** is
  the query's ``?seed=N`` (``.../openenv/Lookup-v0/mcp?seed=3``: every POST goes to that URL) or the request's
  ``params._meta.seed``, else none (a fresh episode). The answer carries ``Mcp-Session-Id`` (the rockroll
  session's id), ``instructions`` (the env's system prompt, then the first observation: the task) and
  ``_meta`` (``rockroll/session_id``, ``rockroll/observation``, ``rockroll/info``, ``rockroll/seed``).
* Every later message carries that header (missing: 400; unknown, closed, reaped by the idle reaper, of another
  env or of another owner: 404, as MCP says, so the client starts a new session). Notifications
  (``notifications/initialized``, ``notifications/cancelled``, ...) answer 202 with no body; ``ping`` ``{}``.
* ``tools/list``: the env's tools (``inputSchema``: the function's ``parameters``); a text env lists none.
* ``tools/call``: one env step with that single call (id ``mcp-<request id>``). The result's ``content`` is the
  call's result text, ``isError`` its error flag, ``_meta`` the step's observation, reward, terminated, truncated
  and info. A bad call (unknown tool, arguments failing the schema) reaches the env like any agent mistake: an
  ``isError`` result, with the env's format penalty. Once the episode has ended (an ``answer`` call, a step
  limit) a call is not run: an ``isError`` result says so, and the client ends the session and initializes
  another (no silent reset, so episodes stay apart). A text env (no tools) answers ``-32602`` naming the env.
* ``DELETE /mcp`` with the header closes the rockroll session (204); ``GET /mcp`` (a stream for messages the
  server starts) is 405: this server sends none.

Auth and isolation are the face's (bearer token, or Basic with the token as password; another owner's private
env is 404). MCP sessions *are* rockroll sessions: they count against the owner's session and sandbox quotas
(at capacity, ``initialize`` answers ``-32000`` with ``data.status`` 429), show in ``GET /v1/sessions``, and the
idle reaper closes forgotten ones. A malformed message answers JSON-RPC's error (``-32700``, ``-32600``,
``-32601``, ``-32602``) with HTTP 200, so ``openenv validate`` (which posts ``{}``) still sees JSON-RPC.
"""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from rockroll.api.openenv.access import Caller, CallerDep
from rockroll.api.openenv.mcp_wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSIONS,
    SERVER_ERROR,
    SESSION_HEADER,
    VERSION_HEADER,
    Message,
    RpcError,
    call_result,
    ended_result,
    initialize_result,
    mcp_tool,
    message_of,
    negotiate,
    read_message,
    rpc_error,
    rpc_result,
)
from rockroll.api.server.errors import ApiError, to_api_error
from rockroll.api.server.state import AppState
from rockroll.api.sessions.live import LiveSession
from rockroll.envs.action_wire import read_action
from rockroll.envs.errors import ActionTypeError

__all__ = ["add_mcp_routes", "answer", "answer_frame", "MAX_BODY_BYTES"]

log = logging.getLogger("rockroll.api")

#: the largest message taken (a call's arguments of 100,000 characters fit, each one ``\uXXXX``-escaped)
MAX_BODY_BYTES = 1_000_000
_SEED_MAX = 2**32 - 1

try:
    _SERVER_VERSION = package_version("rockroll")
except PackageNotFoundError:  # run from a source tree that is not installed
    _SERVER_VERSION = "0"


class _Refusal(Exception):
    """A message refused before any method runs: an HTTP status with a JSON-RPC error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _api_error(e: Exception) -> ApiError:
    return to_api_error(e) or ApiError(500, "internal_error", f"{type(e).__name__}: {e}")


def _server_error(err: ApiError) -> RpcError:
    code = INTERNAL_ERROR if err.status >= 500 and err.status != 503 else SERVER_ERROR
    return RpcError(code, err.message, {"status": err.status, "reason": err.code, "details": err.details})


def _json(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


# --------------------------------------------------------------------- the methods, on one session


async def answer(state: AppState, live: LiveSession, env_id: str, msg: Message) -> dict[str, Any]:
    """The answer to a request on ``live``'s episode (``RpcError`` for a JSON-RPC error; the session's own
    failures, a lost sandbox or a closed session, raise as they come)."""
    if msg.method == "ping":
        return rpc_result(msg.id, {})
    if msg.method == "tools/list":
        tools = await run_in_threadpool(lambda: live.remote.tools)
        return rpc_result(msg.id, {"tools": [mcp_tool(t) for t in tools]})
    if msg.method == "tools/call":
        return rpc_result(msg.id, await _call_tool(state, live, env_id, msg))
    raise RpcError(METHOD_NOT_FOUND, f"Method not found: {msg.method} (this server serves tools only)")


async def _call_tool(state: AppState, live: LiveSession, env_id: str, msg: Message) -> dict[str, Any]:
    """One env step with the single call ``msg`` asks for (see the module docstring)."""
    name, arguments = msg.params.get("name"), msg.params.get("arguments")
    if not isinstance(name, str) or not name:
        raise RpcError(INVALID_PARAMS, "Invalid params: tools/call needs params.name, the tool's name")
    if arguments is not None and not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: params.arguments must be an object")
    tools = await run_in_threadpool(lambda: live.remote.tools)
    if not tools:
        raise RpcError(INVALID_PARAMS, f"Unknown tool {name[:128]!r}: {env_id} has no tools (a text env, played "
                       "with step over /ws or /step)")  # fmt: skip
    call_id = f"mcp-{msg.id}"
    try:
        action = read_action({"text": "", "tool_calls": [{"id": call_id, "name": name, "arguments": arguments or {}}]})
    except ActionTypeError as e:
        raise RpcError(INVALID_PARAMS, f"Invalid params: {e}") from e
    try:
        obs, reward, terminated, truncated, info = await run_in_threadpool(state.sessions.step, live, action)
    except Exception as e:  # noqa: BLE001 - sorted below: an ended episode is a result, the rest errors
        err = _api_error(e)
        if err.code == "reset_needed":
            return ended_result()
        if err.status in (404, 410):
            raise err from e
        raise _server_error(err) from e
    return call_result(call_id, obs, reward, terminated, truncated, info)


async def answer_frame(state: AppState, live: LiveSession, env_id: str, raw: object) -> dict[str, Any]:
    """The answer to a WebSocket ``mcp`` frame's JSON-RPC message on the socket's session (a notification is
    answered too, with ``id`` null, as OpenEnv's server does); never raises: every failure is a JSON-RPC error."""
    rid = raw.get("id") if isinstance(raw, dict) else None
    try:
        msg = message_of(raw)
        if msg is None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: this server sends no requests to answer")
        return await answer(state, live, env_id, msg)
    except RpcError as e:
        return rpc_error(rid, e.code, e.message, e.data)
    except Exception as e:  # noqa: BLE001 - the socket goes on; a lost session answers its next step too
        err = _server_error(_api_error(e))
        return rpc_error(rid, err.code, err.message, err.data)


# --------------------------------------------------------------------- the transport


async def _session(c: Caller, request: Request) -> LiveSession:
    """The session the ``Mcp-Session-Id`` header names (``_Refusal`` 400 without one, 404 for one not the caller's)."""
    sid = request.headers.get(SESSION_HEADER, "")
    if not sid:
        raise _Refusal(400, f"Bad Request: no {SESSION_HEADER} header (send initialize first)")
    try:
        live = await run_in_threadpool(c.state.sessions.get, sid, c.who)
    except ApiError as e:
        if e.status in (404, 410):
            raise _Refusal(404, f"Session not found: {sid[:80]!r} (closed, expired or never opened)") from e
        raise
    if live.env_id != c.env_id:
        raise _Refusal(404, f"Session not found: {sid[:80]!r} is not a session of {c.env_id}")
    return live


def _seed(msg: Message, request: Request) -> int | None:
    meta = msg.params.get("_meta")
    value: object = meta.get("seed") if isinstance(meta, dict) else None
    query = request.query_params.get("seed")
    if value is None and query is not None:
        try:
            value = int(query)
        except ValueError:
            raise RpcError(INVALID_PARAMS, f"Invalid params: ?seed= must be an integer, got {query[:40]!r}") from None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _SEED_MAX:
        raise RpcError(INVALID_PARAMS, f"Invalid params: the seed must be an integer from 0 to {_SEED_MAX}")
    return value


async def _initialize(c: Caller, request: Request, msg: Message) -> JSONResponse:
    """Open and reset the session of a new MCP session (see the module docstring)."""
    seed = _seed(msg, request)
    sessions = c.state.sessions
    try:
        live = await run_in_threadpool(sessions.open, c.who, c.env_id, {})
    except Exception as e:  # noqa: BLE001 - at capacity, an env that fails to start: a JSON-RPC error
        raise _server_error(_api_error(e)) from e
    try:
        obs, info = await run_in_threadpool(sessions.reset, live, seed, None)
        prompt = await run_in_threadpool(live.remote.system_prompt)
    except Exception as e:  # noqa: BLE001 - the session is given back, the client told why
        await run_in_threadpool(_close_quietly, c.state, live)
        raise _server_error(_api_error(e)) from e
    meta = {"rockroll/session_id": live.id, "rockroll/observation": obs, "rockroll/info": info, "rockroll/seed": seed}
    instructions = "\n\n".join(part for part in (prompt.strip(), obs.strip()) if part)
    result = initialize_result(negotiate(msg.params.get("protocolVersion")), c.env_id, instructions, meta,
                               _SERVER_VERSION)  # fmt: skip
    return _json(rpc_result(msg.id, result), headers={SESSION_HEADER: live.id})


def _close_quietly(state: AppState, live: LiveSession) -> None:
    try:
        state.sessions.close(live)
    except Exception as e:  # noqa: BLE001 - closed already (the reaper, a lost sandbox)
        log.debug("closing MCP session %s: %s", live.id, e)


async def post_mcp(c: CallerDep, request: Request) -> Response:
    """One JSON-RPC message of an MCP client (see the module docstring)."""
    body = await request.body()
    rid: Any = None
    msg: Message | None = None
    try:
        if len(body) > MAX_BODY_BYTES:
            raise RpcError(INVALID_REQUEST, f"Invalid Request: over {MAX_BODY_BYTES} bytes")
        msg = read_message(body)
        if msg is None:  # a client's answer: this server asks nothing, so nothing waits for it
            return Response(status_code=202)
        rid = msg.id
        asked = request.headers.get(VERSION_HEADER)
        if asked is not None and asked not in PROTOCOL_VERSIONS:
            raise _Refusal(400, f"Bad Request: unsupported {VERSION_HEADER} {asked[:40]!r} "
                           f"(served: {', '.join(PROTOCOL_VERSIONS)})")  # fmt: skip
        if msg.method == "initialize" and not msg.is_notification:
            return await _initialize(c, request, msg)
        live = await _session(c, request)
        if msg.is_notification:
            return Response(status_code=202)
        return _json(await answer(c.state, live, c.env_id, msg))
    except RpcError as e:
        return _json(rpc_error(rid if rid is not None else e.request_id, e.code, e.message, e.data))
    except _Refusal as e:
        return _json(rpc_error(rid, INVALID_REQUEST, e.message), e.status)
    except Exception as e:  # noqa: BLE001 - the session's own failures, answered in JSON-RPC too
        err = _api_error(e)
        if err.status in (404, 410):  # it went away under the call (closed, its sandbox lost): MCP's 404
            return _json(rpc_error(rid, INVALID_REQUEST, f"Session not found: {err.message}"), 404)
        if err.code == "internal_error":
            log.exception("MCP %s on %s failed", msg.method if msg else "?", c.env_id)
        failed = _server_error(err)
        return _json(rpc_error(rid, failed.code, failed.message, failed.data))


async def delete_mcp(c: CallerDep, request: Request) -> Response:
    """End the MCP session the header names, and its rockroll session."""
    try:
        live = await _session(c, request)
    except _Refusal as e:
        return _json(rpc_error(None, INVALID_REQUEST, e.message), e.status)
    await run_in_threadpool(_close_quietly, c.state, live)
    return Response(status_code=204)


async def get_mcp(c: CallerDep) -> Response:
    """No stream of server-initiated messages: this server sends none."""
    return Response(status_code=405, headers={"Allow": "POST, DELETE"})


def add_mcp_routes(face: FastAPI) -> None:
    """``POST``, ``DELETE`` and ``GET`` ``/mcp`` on the face app."""
    face.add_api_route("/mcp", post_mcp, methods=["POST"], tags=["MCP"], summary="An MCP message (JSON-RPC 2.0)")
    face.add_api_route("/mcp", delete_mcp, methods=["DELETE"], tags=["MCP"], summary="End an MCP session")
    face.add_api_route("/mcp", get_mcp, methods=["GET"], include_in_schema=False)
