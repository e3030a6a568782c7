"""Node agents: ``PUT /v1/nodes/{id}`` (an agent registers and heartbeats), ``POST /v1/nodes/{id}/lost`` (the
cluster's supervisor, e.g. ``rockroll serve-api --ray``, reports an agent gone), ``GET /v1/nodes`` (admins)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Request
from pydantic import BaseModel, ConfigDict, Field

from rockroll.api.nodes.table import HEARTBEAT_S, STALE_S
from rockroll.api.server.deps import StateDep, Who
from rockroll.api.server.errors import ApiError
from rockroll.client.responses import NodeList, NodeLostAnswer, NodeRegistered

__all__ = ["router"]

router = APIRouter(prefix="/v1/nodes", tags=["nodes"])


class NodeRegistration(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint: str = Field(pattern=r"^https?://[^\s/]+(:\d+)?$", max_length=300, description="Data-plane base URL.")
    capacity: int = Field(ge=1, le=1_000_000, description="Most sessions the agent takes.")
    sessions: int = Field(default=0, ge=0, le=1_000_000, description="Sessions it holds now.")
    boot: str = Field(default="", max_length=64, description="Id of the agent's process (a new one: it restarted).")


class NodeLoss(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=500, description="Why the agent is gone (said in the 410s).")


def _check(request: Request, node_id: str, authorization: str) -> Any:
    """The app state, once the caller showed the cluster secret and ``node_id`` is well-formed."""
    state = request.app.state.rr
    state.nodes.check_secret(authorization.partition(" ")[2].strip())
    if not 1 <= len(node_id) <= 64 or not node_id.replace("-", "").replace("_", "").isalnum():
        raise ApiError(422, "validation_error", "a node id is 1-64 letters, digits, '-' or '_'")
    return state


@router.post("/{node_id}/lost", response_model=NodeLostAnswer)
def report_lost(node_id: str, body: NodeLoss, request: Request, authorization: str = Header("")) -> dict[str, Any]:
    """The cluster says an agent is gone (its Ray node left): its sessions answer 410 session_lost from now on."""
    state = _check(request, node_id, authorization)
    if state.nodes.get(node_id) is None:
        raise ApiError(404, "node_not_found", f"no node agent {node_id!r} is registered")
    return {"lost": state.nodes.lose(node_id, body.reason)}


@router.put("/{node_id}", response_model=NodeRegistered)
def register_node(
    node_id: str, body: NodeRegistration, request: Request, authorization: str = Header("")
) -> dict[str, Any]:
    """A node agent announces itself (and then heartbeats); its bearer token is the cluster secret."""
    state = _check(request, node_id, authorization)
    entry, rejoined = state.nodes.register(node_id, body.endpoint, body.capacity, body.sessions, body.boot)
    return {
        "id": entry.id,
        "heartbeat_s": HEARTBEAT_S,
        "stale_s": STALE_S,
        "forget_sessions": rejoined,
        "revoked": state.nodes.revoked,
    }


@router.get("", response_model=NodeList)
def list_nodes(state: StateDep, who: Who) -> dict[str, Any]:
    """The node agents (admins only): id, endpoint, capacity, sessions, live."""
    if not who.admin:
        raise ApiError(403, "forbidden", "only an admin token lists node agents")
    return {"nodes": state.nodes.views() if state.nodes is not None else []}
