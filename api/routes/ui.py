"""The env-health web page (``/ui``, static, no auth) and the JSON it reads (``/v1/overview``).

The overview holds what the caller may see: a summary (sandboxes by state, sessions by env,
sandboxes and sessions by node), the sandboxes, pools, sessions, envs, the restart history with
each restart's reason, and recent jobs with their metric history (the page plots it).

It is polled every second, so it is a bounded summary (issue 13 item 10): the counts cover everything,
each list holds its first ``limit`` items (``totals`` says how many there are; the list routes page
through the rest), jobs come without their configs, the newest few with a thinned metric history, and
:func:`rockroll.api.ui.overview_fit.fit` cuts the lists further until the JSON is under :data:`MAX_BYTES`.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, RedirectResponse
from sqlalchemy import select

from rockroll.api.db import SandboxOwner
from rockroll.api.routes.jobs import job_view
from rockroll.api.sandboxes.views import pool_views
from rockroll.api.server.deps import StateDep, Who
from rockroll.api.server.errors import ApiError
from rockroll.api.ui.overview_fit import fit, thin
from rockroll.client.responses import Overview

__all__ = ["router"]

router = APIRouter(tags=["ui"])
STATIC = Path(__file__).resolve().parent.parent / "ui" / "static"
_ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}
#: items of each list by default, and at most (``?limit=``)
DEFAULT_ITEMS, MAX_ITEMS = 50, 100
#: jobs listed; the newest HISTORY_JOBS carry their history: HISTORY_POINTS reports of HISTORY_METRICS metrics
MAX_JOBS, HISTORY_JOBS, HISTORY_POINTS, HISTORY_METRICS = 20, 5, 60, 6
#: the overview's JSON stays under this many bytes, whatever the server holds
MAX_BYTES = 95_000


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
def overview(
    state: StateDep, who: Who, limit: Annotated[int, Query(ge=1, le=MAX_ITEMS)] = DEFAULT_ITEMS
) -> dict[str, Any]:
    """What the page shows (see the module docstring), for what the caller may see: the summary counts all
    of it, each list holds its first ``limit`` items, and the answer stays under 100 kB."""
    with state.db.session() as s:
        records = {r.sandbox_id: (r.owner, r.expires_at) for r in s.scalars(select(SandboxOwner))}
    owners = {sid: owner for sid, (owner, _) in records.items()}
    sessions = state.sessions.list(who)
    per_sandbox: dict[str, int] = {}
    for live in sessions:
        per_sandbox[live.sandbox_id] = per_sandbox.get(live.sandbox_id, 0) + 1
    visible = [
        sb
        for sb in state.placement.list()
        if who.admin or (owners.get(sb.id) and owners.get(sb.id) == who.owner) or sb.id in per_sandbox
    ]
    nodes = _nodes(state)
    sandboxes = []
    for sb in visible[:limit]:
        view = state.placement.describe(sb)
        view.update(owner=owners.get(sb.id, ""), api_sessions=per_sandbox.get(sb.id, 0), node=nodes.get(sb.id, ""))
        view["expires_at"] = records.get(sb.id, ("", None))[1]
        sandboxes.append(view)
    visible_ids = {sb.id for sb in visible}
    seen = [e for e in list(state.placement.manager.restart_log) if who.admin or e["sandbox_id"] in visible_ids]
    restarts = [{**e, "owner": owners.get(e["sandbox_id"], "")} for e in reversed(seen)]
    envs = state.catalog.list(who)
    pools = (
        state.placement.pool_views()
        if who.admin
        else pool_views(state.placement.manager, state.placement.pools, visible)
    )
    jobs = [_job(state, j, i < HISTORY_JOBS) for i, j in enumerate(state.jobs.list(who, min(limit, MAX_JOBS)))]
    out = {
        "time": time.time(),
        "backend": state.placement.backend_name,
        "isolation": state.placement.isolation,
        "principal": {"owner": who.owner, "admin": who.admin},
        "summary": _summary(visible, sessions, nodes),
        "sandboxes": sandboxes,
        "pools": pools[:limit],
        "envs": [e | {"description": str(e.get("description", ""))[:200]} for e in envs[:limit]],
        "sessions": [s.view() | {"system_prompt": ""} for s in sessions[:limit]],
        "restarts": restarts[:limit],
        "jobs": jobs,
        "alerts": state.alerts.alerts(who, resolved=False)[:limit] if state.alerts is not None else [],
        "totals": {
            "sandboxes": len(visible),
            "sessions": len(sessions),
            "envs": len(envs),
            "pools": len(pools),
            "restarts": len(restarts),
        },
    }
    return fit(out, MAX_BYTES)


def _job(state: Any, job: Any, with_history: bool) -> dict[str, Any]:
    """A job as the overview shows it: no config, 32 metrics, a thinned history of the plotted metrics."""
    view = {k: v for k, v in job_view(job).items() if k != "config"}
    view["metrics"] = dict(list((view["metrics"] or {}).items())[:32])
    view["history"] = thin(state.metric_history.get(job.id), HISTORY_POINTS, HISTORY_METRICS) if with_history else []
    return view


def _nodes(state: Any) -> dict[str, str]:
    """The node (Docker host, or this machine for local backends) each sandbox runs on."""
    here = platform.node() or "local"
    return {sb.id: (getattr(sb.handle, "host", "") or here) for sb in state.placement.list()}


def _summary(sandboxes: list[Any], sessions: list[Any], nodes: dict[str, str]) -> dict:
    """Counts of everything the caller may see: sandboxes by state, sessions by env, both by node."""
    by_state: dict[str, int] = {}
    by_env: dict[str, int] = {}
    by_node: dict[str, dict[str, int]] = {}
    for sb in sandboxes:
        by_state[str(sb.state)] = by_state.get(str(sb.state), 0) + 1
        by_node.setdefault(nodes.get(sb.id, ""), {"sandboxes": 0, "sessions": 0})["sandboxes"] += 1
    for se in sessions:
        by_env[se.env_id] = by_env.get(se.env_id, 0) + 1
        node = by_node.setdefault(nodes.get(se.sandbox_id, ""), {"sandboxes": 0, "sessions": 0})
        node["sessions"] += 1
    return {
        "sandboxes": len(sandboxes),
        "sessions": len(sessions),
        "sandboxes_by_state": by_state,
        "sessions_by_env": by_env,
        "by_node": by_node,
    }
