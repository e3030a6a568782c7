"""``GET /v1/health`` and ``GET /metrics`` (no auth).

Both are async and read only in-memory counts: they answer on the request loop and never wait for
a thread, so no amount of work elsewhere (long execs, slow routes on the shared thread pool)
delays them. Keep them free of database or sandbox calls.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from rockroll.api.server.deps import StateDep
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
        "sandboxes": snap["by_state"],
        "restarts": snap["restarts"],
        "sessions": len(state.sessions),
        "uptime_s": round(time.time() - state.started_at, 3),
        "dev_mode": state.settings.dev_mode,
    }


@router.get("/metrics", response_class=Response)
async def get_metrics(state: StateDep) -> Response:
    """Prometheus text format."""
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
