"""The env-health web page (``/ui``, static, no auth) and the JSON it reads (``/v1/overview``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse
from sqlalchemy import select

from rockroll.api.db import SandboxOwner
from rockroll.api.deps import StateDep, Who
from rockroll.api.errors import ApiError
from rockroll.api.responses import Overview
from rockroll.api.routes.jobs import job_view

__all__ = ["router"]

router = APIRouter(tags=["ui"])
STATIC = Path(__file__).resolve().parent.parent / "static"
_ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}


@router.get("/ui", include_in_schema=False)
def ui_page() -> FileResponse:
    """The page (a static file; it reads ``/v1/overview`` with the token the user gives it)."""
    return FileResponse(STATIC / "index.html", media_type="text/html")


@router.get("/", include_in_schema=False)
def root() -> RedirectResponse:
    """Redirect to the health page."""
    return RedirectResponse("/ui")


@router.get("/ui/{asset}", include_in_schema=False)
def ui_asset(asset: str) -> FileResponse:
    """The page's script and stylesheet."""
    if asset not in _ASSETS:
        raise ApiError(404, "not_found", f"no asset {asset!r}")
    return FileResponse(STATIC / asset, media_type=_ASSETS[asset])


@router.get("/v1/overview", tags=["health"], response_model=Overview)
def overview(state: StateDep, who: Who) -> dict[str, Any]:
    """Everything the page shows: sandboxes, pools, envs, sessions and recent jobs the caller may see."""
    with state.db.session() as s:
        owners = {r.sandbox_id: r.owner for r in s.scalars(select(SandboxOwner))}
    sessions = state.sessions.list(who)
    per_sandbox: dict[str, int] = {}
    for live in sessions:
        per_sandbox[live.sandbox_id] = per_sandbox.get(live.sandbox_id, 0) + 1
    sandboxes = []
    for sb in state.placement.list():
        owner = owners.get(sb.id, "")
        if who.admin or (owner and owner == who.owner) or sb.id in per_sandbox:
            view = state.placement.describe(sb)
            view.update(owner=owner, api_sessions=per_sandbox.get(sb.id, 0))
            sandboxes.append(view)
    return {
        "time": time.time(),
        "backend": state.placement.backend_name,
        "principal": {"owner": who.owner, "admin": who.admin},
        "sandboxes": sandboxes,
        "pools": state.placement.pool_views(),
        "envs": state.catalog.list(),
        "sessions": [s.view() | {"system_prompt": ""} for s in sessions],
        "jobs": [job_view(j) for j in state.jobs.list(who, 20)],
    }
