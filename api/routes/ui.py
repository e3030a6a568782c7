"""The env-health web page (``/ui``, static, no auth) and the JSON it reads (``/v1/overview``).

The overview holds what the caller may see: a summary (sandboxes by state, sessions by env,
sandboxes and sessions by node), the sandboxes, pools, sessions, envs, the restart history with
each restart's reason, and recent jobs with their metric history (the page plots it).
"""

from __future__ import annotations

import platform
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
    """Everything the page shows (see the module docstring), for what the caller may see."""
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
    jobs = [job_view(j) for j in state.jobs.list(who, 20)]
    for job in jobs:
        job["history"] = state.metric_history.get(job["id"])[-200:]
    views = [s.view() | {"system_prompt": ""} for s in sessions]
    visible = {sb["id"] for sb in sandboxes}
    restarts = [e for e in list(state.placement.manager.restart_log) if who.admin or e["sandbox_id"] in visible]
    return {
        "time": time.time(),
        "backend": state.placement.backend_name,
        "principal": {"owner": who.owner, "admin": who.admin},
        "summary": _summary(sandboxes, views, _nodes(state)),
        "sandboxes": sandboxes,
        "pools": state.placement.pool_views(),
        "envs": state.catalog.list(),
        "sessions": views,
        "restarts": [e | {"owner": owners.get(e["sandbox_id"], "")} for e in reversed(restarts)][:100],
        "jobs": jobs,
    }


def _nodes(state: Any) -> dict[str, str]:
    """The node (Docker host, or this machine for local backends) each sandbox runs on."""
    here = platform.node() or "local"
    return {sb.id: (getattr(sb.handle, "host", "") or here) for sb in state.placement.list()}


def _summary(sandboxes: list[dict[str, Any]], sessions: list[dict[str, Any]], nodes: dict[str, str]) -> dict:
    """Counts of the overview's own lists: sandboxes by state, sessions by env, both by node."""
    by_state: dict[str, int] = {}
    by_env: dict[str, int] = {}
    by_node: dict[str, dict[str, int]] = {}
    for sb in sandboxes:
        by_state[sb["state"]] = by_state.get(sb["state"], 0) + 1
        sb["node"] = nodes.get(sb["id"], "")
        by_node.setdefault(sb["node"], {"sandboxes": 0, "sessions": 0})["sandboxes"] += 1
    for se in sessions:
        by_env[se["env"]] = by_env.get(se["env"], 0) + 1
        node = by_node.setdefault(nodes.get(se["sandbox_id"], ""), {"sandboxes": 0, "sessions": 0})
        node["sessions"] += 1
    return {
        "sandboxes": len(sandboxes),
        "sessions": len(sessions),
        "sandboxes_by_state": by_state,
        "sessions_by_env": by_env,
        "by_node": by_node,
    }
