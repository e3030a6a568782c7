"""``WS /openenv/<env id>/ws``: one rockroll session per OpenEnv WebSocket, played frame by frame.

The socket is authenticated and the env looked up before it is accepted: a missing or revoked token, or an env
the caller may not see (another owner's private env), is refused with rockroll's HTTP error (401, 404) in place
of the upgrade. Once accepted, a session is opened (at capacity: a ``CAPACITY_REACHED`` frame, then the socket
closes, as OpenEnv does) and closed when the socket closes. Frames are answered in order
(:mod:`rockroll.api.openenv.wire`):

* ``reset`` (``data``: ``seed``, ``episode_id``, ``options``) and ``step`` (``data``: ``{"message": TEXT}``, with
  ``"tool_calls"`` for a tool env):
  an ``observation`` frame; ``state``: a ``state`` frame; ``close``: the session closes; ``mcp`` (``data``: a
  JSON-RPC request): its answer on the socket's episode, ``tools/list`` and ``tools/call`` as on ``/mcp``
  (:mod:`rockroll.api.openenv.mcp_http`).
* A malformed frame (not text, not JSON, not an object, an unknown ``type``, a bad ``data``, over
  ``MAX_FRAME_CHARS``) is answered with OpenEnv's error frame (``INVALID_JSON``, ``VALIDATION_ERROR``,
  ``UNKNOWN_TYPE``) and the session goes on. So does an env error (``EXECUTION_ERROR``, with rockroll's
  ``status`` and ``reason``: ``reset_needed``, ``invalid_env_input``, ...). A lost sandbox answers
  ``SESSION_ERROR`` and closes the socket.

The token is checked again with each frame (cached for ``TOKEN_CACHE_S``): once revoked, the next frame closes
the socket (code 4401, ``token_revoked``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from rockroll.api.openenv.access import face_state, principal_of
from rockroll.api.openenv.mcp_http import answer_frame
from rockroll.api.openenv.wire import (
    Frame,
    ResetData,
    TextAction,
    TextState,
    WSErrorCode,
    error_frame,
    observation_frame,
    validation_frame,
)
from rockroll.api.server.errors import ApiError, error_body, to_api_error
from rockroll.api.server.state import AppState
from rockroll.api.sessions.live import LiveSession

__all__ = ["play_socket", "MAX_FRAME_CHARS"]

log = logging.getLogger("rockroll.api")

#: the longest frame taken: an action of 100,000 characters fits even with each one ``\uXXXX``-escaped
MAX_FRAME_CHARS = 1_000_000
_TYPES = ("reset", "step", "state", "close", "mcp")


def _api_error(e: Exception) -> ApiError:
    return to_api_error(e) or ApiError(500, "internal_error", f"{type(e).__name__}: {e}")


@dataclass
class _Episode:
    """What ``state`` reports: the episode's id and steps so far."""

    episode_id: str | None = None
    step_count: int = 0


async def play_socket(websocket: WebSocket) -> None:
    """Serve one OpenEnv session (see the module docstring)."""
    state = face_state(websocket.app)
    try:
        who = await principal_of(state, websocket.headers)
        env_id = str(state.catalog.get(websocket.path_params["env_id"], who)["id"])
    except Exception as e:  # noqa: BLE001 - every refusal is an HTTP answer in place of the upgrade
        await _refuse(websocket, _api_error(e))
        return
    await websocket.accept()
    try:
        live = await run_in_threadpool(state.sessions.open, who, env_id, {})
    except Exception as e:  # noqa: BLE001 - answered like OpenEnv's failed session start
        err = _api_error(e)
        code = WSErrorCode.CAPACITY_REACHED if err.status == 429 else WSErrorCode.FACTORY_ERROR
        await websocket.send_text(error_frame(code, err.message, status=err.status, reason=err.code))
        await websocket.close()
        return
    try:
        await _serve(websocket, state, live, env_id)
    except WebSocketDisconnect:  # the client left while an answer was on its way
        pass
    finally:
        try:
            await run_in_threadpool(state.sessions.close, live)
        except Exception as e:  # noqa: BLE001 - closed already (the idle reaper, a lost sandbox)
            log.debug("closing OpenEnv session %s: %s", live.id, e)
        with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):  # closed already, or the client left
            await websocket.close()


async def _refuse(websocket: WebSocket, err: ApiError) -> None:
    """rockroll's HTTP error in place of the upgrade (where the server takes that), else a close with 4000+status."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        headers = {"WWW-Authenticate": 'Basic realm="rockroll"'} if err.status == 401 else None
        body = error_body(err.code, err.message, err.details)
        await websocket.send_denial_response(JSONResponse(body, status_code=err.status, headers=headers))
    else:
        await websocket.close(code=4000 + err.status, reason=err.code)


async def _serve(websocket: WebSocket, state: AppState, live: LiveSession, env_id: str) -> None:
    """Answer frames until the client closes the socket or sends ``close``."""
    episode = _Episode()
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        try:
            await principal_of(state, websocket.headers)
        except ApiError:
            with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):
                await websocket.close(code=4401, reason="token_revoked")
            return
        frame = _frame(message)
        if isinstance(frame, str):  # malformed: OpenEnv's error frame, and the session goes on
            await websocket.send_text(frame)
            continue
        if frame.type == "close":
            return
        try:
            answer = await _answer(state, live, env_id, episode, frame)
        except ValidationError as e:
            answer = validation_frame("Invalid message", e)
        except Exception as e:  # noqa: BLE001 - an env error is answered; the session goes on
            err = _api_error(e)
            if err.code == "sandbox_lost":
                await websocket.send_text(error_frame(WSErrorCode.SESSION_ERROR, err.message, status=err.status))
                await websocket.close(code=4410, reason="sandbox_lost")
                return
            answer = error_frame(WSErrorCode.EXECUTION_ERROR, err.message, status=err.status, reason=err.code)
        await websocket.send_text(answer)


def _frame(message: Mapping[str, Any]) -> Frame | str:
    """The frame a WebSocket message carries, or the error frame answering a malformed one."""
    text = message.get("text")
    if text is None:
        return error_frame(WSErrorCode.INVALID_JSON, "Invalid JSON: binary frames are not taken, send JSON text")
    if len(text) > MAX_FRAME_CHARS:
        return error_frame(WSErrorCode.VALIDATION_ERROR, f"Invalid message: over {MAX_FRAME_CHARS} characters")
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as e:
        return error_frame(WSErrorCode.INVALID_JSON, f"Invalid JSON: {e}")
    if not isinstance(raw, dict):
        return error_frame(WSErrorCode.VALIDATION_ERROR, "Invalid message: a frame is an object {type, data}")
    if raw.get("type") not in _TYPES:
        return error_frame(WSErrorCode.UNKNOWN_TYPE, f"Unknown message type: {str(raw.get('type', ''))[:100]}")
    try:
        return Frame.model_validate(raw)
    except ValidationError as e:
        return validation_frame("Invalid message", e)


async def _answer(state: AppState, live: LiveSession, env_id: str, episode: _Episode, frame: Frame) -> str:
    """The answer to a well-formed frame (raises ``ValidationError`` for a bad ``data``, env errors as they come)."""
    sessions = state.sessions
    if frame.type == "reset":
        data = ResetData.model_validate(frame.data or {})
        obs, info = await run_in_threadpool(sessions.reset, live, data.seed, data.options)
        episode.episode_id, episode.step_count = data.episode_id or uuid.uuid4().hex, 0
        return observation_frame(obs, None, False, False, info)
    if frame.type == "step":
        action = TextAction.model_validate(frame.data if frame.data is not None else {})
        obs, reward, terminated, truncated, info = await run_in_threadpool(sessions.step, live, action.to_action())
        episode.step_count += 1
        return observation_frame(obs, reward, terminated, truncated, info)
    if frame.type == "state":
        now = TextState(episode_id=episode.episode_id, step_count=episode.step_count, env_id=env_id, session_id=live.id)
        return json.dumps({"type": "state", "data": now.model_dump()})
    return json.dumps({"type": "mcp", "data": await answer_frame(state, live, env_id, frame.data)}, default=str)
