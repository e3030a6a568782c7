"""``/v1/sessions/{id}/ws``: one WebSocket per session, the low-overhead path for a playing agent.

Authorisation happens when the socket opens (``Authorization: Bearer`` header, as on every
route); the session must belong to the caller. The token is checked again every
``TOKEN_CACHE_S / 2`` seconds while the socket is open: once it is revoked the socket is closed
(code 4401, reason ``token_revoked``) within a second. Each text message is one call, answered in
order with the same JSON as the HTTP routes:

* ``{"op": "step", "action": "..."}`` -> ``{"observation", "reward", "terminated", "truncated", "info"}``; the
  action is the agent's text or a turn with tool calls ``{"text", "tool_calls": [{"id", "name", "arguments"}]}``
  (a malformed one: ``422 validation_error`` with the wrong ``field`` in ``details``)
* ``{"op": "reset", "seed": 1, "options": {}}`` -> ``{"observation", "info"}``
* ``{"op": "state"}`` -> ``{"state": {...}}``; ``{"op": "actions"}`` -> ``{"actions": [...]}``

A bad message or an env error is answered ``{"error": {"code", "message", "details"}, "status": N}``
(N: the HTTP status the same error has on the HTTP routes) and the socket stays open;
steps and resets of a session on the embedded node agent run on the event loop over the sandbox's
channel (no worker thread, no HTTP hop), numbered with the data plane's steps; a lost sandbox closes it after the ``sandbox_lost`` answer. Steps are counted and
timed like HTTP steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool

from rockroll.api.server.deps import TOKEN_CACHE_S, principal_for
from rockroll.api.server.errors import ApiError, error_body, to_api_error
from rockroll.api.server.state import AppState
from rockroll.api.sessions.live import LiveSession
from rockroll.envs.action_wire import read_action
from rockroll.envs.errors import ActionTypeError
from rockroll.envs.json_types import JSONObject
from rockroll.envs.tools import Action
from rockroll.sandbox.errors import SandboxLost
from rockroll.sandbox.node.agent import AgentSession, NodeAgent
from rockroll.sandbox.node.wire import WireError

__all__ = ["router"]

router = APIRouter(tags=["sessions"])
MAX_MESSAGE_CHARS = 200_000


def _call(state: AppState, live: LiveSession, msg: Any) -> dict[str, Any]:
    """Run one message (on a worker thread); raise ApiError for a malformed one."""
    if not isinstance(msg, dict):
        raise ApiError(422, "validation_error", "a message must be a JSON object with an 'op'")
    op = msg.get("op")
    if op == "step":
        action = _action(msg.get("action"))
        obs, reward, terminated, truncated, info = state.sessions.step(live, action)
        return {"observation": obs, "reward": reward, "terminated": terminated, "truncated": truncated, "info": info}
    if op == "reset":
        seed, options = msg.get("seed"), msg.get("options")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32):
            raise ApiError(422, "validation_error", "'seed' must be null or an int in [0, 2**32)")
        if options is not None and not isinstance(options, dict):
            raise ApiError(422, "validation_error", "'options' must be null or an object")
        obs, info = state.sessions.reset(live, seed, options)
        return {"observation": obs, "info": info}
    if op == "state":
        return {"state": state.sessions.get_state(live)}
    if op == "actions":
        return {"actions": state.sessions.action_candidates(live)}
    raise ApiError(422, "validation_error", "'op' must be one of step, reset, state, actions")


def _action(value: object) -> Action:
    """A step's action, read (a 422 naming the wrong field for a malformed one)."""
    try:
        return read_action(value)
    except ActionTypeError as e:
        raise ApiError(422, "validation_error", str(e), {"field": e.field}) from e


_ON_LOOP = ("step", "reset")


async def _on_loop(
    state: AppState, agent: NodeAgent, entry: AgentSession, live: LiveSession, msg: dict[str, Any]
) -> JSONObject:
    """A step or reset of a session on the embedded node agent, from the event loop over its sandbox's
    channel (:meth:`rockroll.sandbox.node.agent.NodeAgent.acall`; numbered with the data plane's steps)."""
    op = msg["op"]
    call = {"op": op, "action": msg.get("action")} if op == "step" else {"op": op, "seed": msg.get("seed"),
                                                                         "options": msg.get("options")}  # fmt: skip
    live.last_used = time.monotonic()
    t0 = time.perf_counter()
    try:
        answer = await agent.acall(entry, call)
    except WireError as e:  # a malformed action, seed or options
        raise ApiError(e.status, e.code, str(e), dict(e.details)) from e
    except SandboxLost as e:
        raise ApiError(410, "sandbox_lost", str(e), {"sandbox_id": live.sandbox_id, "session_id": live.id}) from e
    if op == "step":
        answer.pop("seq", None)
        answer.pop("replayed", None)
        live.steps += 1
        state.metrics.observe_step(time.perf_counter() - t0)
    return answer


@router.websocket("/v1/sessions/{session_id}/ws")
async def session_socket(websocket: WebSocket, session_id: str) -> None:
    """Play a session over one WebSocket (see the module docstring)."""
    state: AppState = websocket.app.state.rr
    header = websocket.headers.get("authorization", "")
    try:
        who = await principal_for(state, header)
        live = await run_in_threadpool(state.sessions.get, session_id, who)
    except ApiError as e:
        await websocket.close(code=4000 + e.status, reason=e.code)
        return
    await websocket.accept()
    serving = asyncio.create_task(_serve(websocket, state, live))
    try:
        while not serving.done():
            await asyncio.wait({serving}, timeout=TOKEN_CACHE_S / 2)
            if not serving.done() and not await _still_valid(state, header):
                serving.cancel()
                with contextlib.suppress(RuntimeError, OSError):  # the client may be gone already
                    await websocket.close(code=4401, reason="token_revoked")
                return
        await serving  # its outcome: None, or what it raised
    finally:
        serving.cancel()


async def _still_valid(state: AppState, header: str) -> bool:
    """Whether the socket's token still authenticates (False once revoked)."""
    try:
        await principal_for(state, header)
    except ApiError:
        return False
    return True


async def _serve(websocket: WebSocket, state: AppState, live: LiveSession) -> None:
    """Answer the socket's messages in order until it closes."""
    try:
        while True:
            text = await websocket.receive_text()
            try:
                if len(text) > MAX_MESSAGE_CHARS:
                    raise ApiError(413, "too_large", f"a message is limited to {MAX_MESSAGE_CHARS} characters")
                try:
                    msg = json.loads(text)
                except (ValueError, RecursionError) as e:  # RecursionError: nested too deeply
                    raise ApiError(422, "validation_error", f"not JSON: {e}") from e
                if (
                    live.entry is not None
                    and state.agent is not None
                    and isinstance(msg, dict)
                    and msg.get("op") in _ON_LOOP
                ):
                    answer = await _on_loop(state, state.agent, live.entry, live, msg)
                else:
                    answer = await run_in_threadpool(_call, state, live, msg)
            except Exception as e:  # noqa: BLE001 - every failure is answered on the socket
                mapped = to_api_error(e) or ApiError(500, "internal_error", f"{type(e).__name__}: {e}")
                body = error_body(mapped.code, mapped.message, mapped.details) | {"status": mapped.status}
                await websocket.send_text(json.dumps(body))
                if mapped.code == "sandbox_lost":
                    await websocket.close(code=4410, reason="sandbox_lost")
                    return
                continue
            await websocket.send_text(json.dumps(answer, separators=(",", ":")))
    except WebSocketDisconnect:
        return
