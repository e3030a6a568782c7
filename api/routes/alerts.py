"""``GET /v1/alerts``: the alerts of the control plane's rules (:mod:`rockroll.api.alerts.engine`) the caller may see."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from rockroll.api.server.deps import StateDep, Who
from rockroll.client.responses import AlertList

__all__ = ["router"]

router = APIRouter(prefix="/v1/alerts", tags=["health"])


@router.get("", response_model=AlertList)
async def list_alerts(state: StateDep, who: Who, resolved: bool = True) -> dict[str, Any]:
    """Firing alerts (newest first), then (``resolved``) the recently resolved ones: the caller's own and the
    platform-wide ones (an admin sees every owner's)."""
    return {"alerts": state.alerts.alerts(who, resolved=resolved) if state.alerts is not None else []}
