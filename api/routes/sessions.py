"""Session routes: open (placed on a pooled sandbox), reset, step, batch step, fork, state, close.

A step's ``action`` is the agent's text or a turn with tool calls ``{text, tool_calls}``
(:mod:`rockroll.api.server.action_body`); an open's answer and a session's view list the env's ``tools``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response

from rockroll.api.server.auth import Principal
from rockroll.api.server.deps import StateDep, Who
from rockroll.api.server.errors import ApiError
from rockroll.api.server.schemas import BatchStepRequest, ResetRequest, SessionCreate, StateBody, StepRequest
from rockroll.api.server.state import AppState
from rockroll.api.sessions.live import LiveSession
from rockroll.client.responses import (
    Actions,
    BatchResults,
    DataPlaneToken,
    Ok,
    ResetResult,
    SessionInfo,
    SessionList,
    SessionOpened,
    SessionState,
    StepResult,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


def _json(payload: dict[str, Any]) -> Response:
    """Serialise a plain-JSON answer directly (skips FastAPI's generic encoder on the hot path)."""
    return Response(json.dumps(payload, separators=(",", ":")), media_type="application/json")


def _step_view(out: tuple) -> dict[str, Any]:
    obs, reward, terminated, truncated, info = out
    return {"observation": obs, "reward": reward, "terminated": terminated, "truncated": truncated, "info": info}


def _data_plane(state: AppState, live: LiveSession, request: Request, who: Principal) -> dict[str, Any]:
    """Where ``live`` is stepped directly (its node agent's endpoint) and a fresh token for it; {} when nowhere.

    The token names the API token ``who`` called with: revoking that one closes the data-plane sockets.
    """
    node = state.nodes.get(live.node) if live.node and state.nodes is not None else None
    if node is None or state.tokens is None:
        return {}
    endpoint = node.endpoint or str(request.base_url).rstrip("/")
    token, expires_at = state.tokens.issue(live.id, live.owner, node.id, token_id=who.token_id)
    return {"data_plane": {"endpoint": endpoint, "node": node.id, "token": token, "expires_at": expires_at}}


@router.post("", status_code=201, response_model=SessionOpened)
def create_session(
    body: SessionCreate,
    state: StateDep,
    who: Who,
    request: Request,
    idempotency_key: Annotated[str, Header(max_length=64, pattern=r"^[A-Za-z0-9_.:-]*$")] = "",
) -> dict[str, Any]:
    """Open an env session, placed on a node agent; ``data_plane`` says where to step it directly.

    With an ``Idempotency-Key`` header, the open may be resent (to any replica): a key already used by
    the caller answers the session it opened (a closed one: 404).
    """
    live = state.sessions.open(
        who, body.env, body.kwargs, group=body.group, avoid=body.avoid_nodes, key=idempotency_key
    )
    return {
        "id": live.id,
        "sandbox_id": live.sandbox_id,
        "env": live.env_id,
        "system_prompt": live.remote.system_prompt(),
        "tools": live.tools(),
    } | _data_plane(state, live, request, who)


@router.get("", response_model=SessionList)
def list_sessions(
    state: StateDep,
    who: Who,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """The caller's open sessions: ``limit`` from ``offset`` on."""
    return {"sessions": [s.view() for s in state.sessions.list(who)[offset : offset + limit]]}


@router.post("/step", response_model=BatchResults)
def step_sessions(body: BatchStepRequest, state: StateDep, who: Who) -> Response:
    """One step (or reset) on each listed session, in order; each result is an answer or an ``error`` body.

    The vectorised path for rollouts: one request per batch instead of one per session.
    """
    ids = [item.id for item in body.steps]
    if len(set(ids)) != len(ids):
        raise ApiError(400, "bad_request", "each session may appear once per batch")
    items = [(item.id, item.op, item.action, item.seed) for item in body.steps]
    return _json({"results": state.sessions.batch(who, items)})


@router.get("/{session_id}", response_model=SessionInfo)
def show_session(session_id: str, state: StateDep, who: Who) -> SessionInfo:
    """One session: env, sandbox, steps so far, system prompt."""
    return state.sessions.get(session_id, who).view()


@router.post("/{session_id}/reset", response_model=ResetResult)
def reset_session(session_id: str, body: ResetRequest, state: StateDep, who: Who) -> dict[str, Any]:
    """Start a new episode: ``{"observation", "info"}``."""
    live = state.sessions.get(session_id, who)
    obs, info = state.sessions.reset(live, body.seed, body.options)
    return {"observation": obs, "info": info}


@router.post("/{session_id}/step", response_model=StepResult)
def step_session(session_id: str, body: StepRequest, state: StateDep, who: Who) -> dict[str, Any]:
    """Play the agent's text or a turn with tool calls: ``{"observation", "reward", "terminated", "truncated",
    "info"}`` (a tool env's ``info`` carries ``tool_results``)."""
    live = state.sessions.get(session_id, who)
    return _step_view(state.sessions.step(live, body.action))


@router.post("/{session_id}/fork", status_code=201, response_model=SessionOpened)
def fork_session(session_id: str, state: StateDep, who: Who, request: Request) -> dict[str, Any]:
    """A new session continuing from this one's current state."""
    forked = state.sessions.fork(state.sessions.get(session_id, who))
    return {"id": forked.id, "sandbox_id": forked.sandbox_id, "env": forked.env_id} | _data_plane(
        state, forked, request, who
    )


@router.post("/{session_id}/token", response_model=DataPlaneToken)
def refresh_token(session_id: str, state: StateDep, who: Who, request: Request) -> dict[str, Any]:
    """A fresh data-plane token for the session (404 when no node agent serves it)."""
    live = state.sessions.get(session_id, who)
    out = _data_plane(state, live, request, who)
    if not out:
        raise ApiError(404, "no_data_plane", "this session is stepped through the control plane only")
    return out


@router.get("/{session_id}/actions", response_model=Actions)
def session_actions(session_id: str, state: StateDep, who: Who) -> dict[str, Any]:
    """Legal actions now (answer text without the ``<answer>`` tags): what a random agent picks from."""
    return {"actions": state.sessions.action_candidates(state.sessions.get(session_id, who))}


@router.get("/{session_id}/state", response_model=SessionState)
def get_session_state(session_id: str, state: StateDep, who: Who) -> dict[str, Any]:
    """A JSON snapshot of the session's env (``PUT`` it back to restore)."""
    return {"state": state.sessions.get_state(state.sessions.get(session_id, who))}


@router.put("/{session_id}/state", response_model=Ok)
def set_session_state(session_id: str, body: StateBody, state: StateDep, who: Who) -> dict[str, Any]:
    """Restore a snapshot taken with ``GET .../state``."""
    state.sessions.set_state(state.sessions.get(session_id, who), body.state)
    return {"ok": True}


@router.delete("/{session_id}", status_code=204)
def delete_session(session_id: str, state: StateDep, who: Who) -> None:
    """Close the session and free its slot on the sandbox (a session lost with its node is forgotten)."""
    state.sessions.close(state.sessions.get(session_id, who, lost_ok=True))
