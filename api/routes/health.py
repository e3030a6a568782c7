"""``GET /v1/health`` (no auth) and ``GET /metrics`` (``Settings.metrics_token`` as a bearer when set; open but
with owner names and server paths hashed otherwise: :mod:`rockroll.api.server.metrics`).

Both are async and read only in-memory counts: they answer on the request loop and never wait for
a thread, so no amount of work elsewhere (long execs, slow routes on the shared thread pool)
delays them. Keep them free of database or sandbox calls.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from rockroll.api.server.deps import StateDep
from rockroll.api.server.errors import ApiError
from rockroll.api.server.metrics import Redacted, label_key, scrape_allowed
from rockroll.client.responses import Health

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/v1/health", response_model=Health)
async def get_health(state: StateDep) -> dict[str, Any]:
    """Status, sandbox backend and counts of sandboxes by state."""
    snap = state.placement.snapshot()
    return {
        "status": "ok",
        "backend": state.placement.backend_name,
        "isolation": state.placement.isolation,
        "sandboxes": snap["by_state"],
        "restarts": snap["restarts"],
        "sessions": len(state.sessions),
        "uptime_s": round(time.time() - state.started_at, 3),
        "dev_mode": state.settings.dev_mode,
    }


@router.get("/metrics", response_class=Response)
async def get_metrics(state: StateDep, request: Request) -> Response:
    """Prometheus text format; 401 without ``metrics_token`` when one is set."""
    token = state.settings.metrics_token
    if not scrape_allowed(request.headers.get("authorization"), token):
        raise ApiError(401, "unauthorized", "/metrics needs the server's metrics token: 'Authorization: Bearer TOKEN'")
    registry = state.metrics.registry
    key = label_key(state.settings.cluster_secret, state.metrics.label_key)
    body = generate_latest(registry if token else Redacted(registry, key))  # type: ignore[arg-type]
    return Response(body, media_type=CONTENT_TYPE_LATEST)
