"""JSON views of managed sandboxes and pools (for the routes, the overview page and metrics).

An owner's pool (``sessions@3f2a...``) is shown under its spec's pool (``sessions``): the owner of
a sandbox is shown by the routes from its record, never through the pool name.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import NotRequired, TypedDict

from rockroll.api.sandboxes.owners import base_pool
from rockroll.sandbox.managed import ManagedSandbox, SandboxState
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.pool import PoolConfig

__all__ = ["Counts", "describe", "pool_views", "snapshot"]


class Counts(TypedDict):
    """Sandboxes by state and restarts summed over live sandboxes; the placement adds how many it reaped, the
    app's metrics how many sessions are open."""

    by_state: dict[str, int]
    restarts: int
    reaped: NotRequired[int]
    sessions: NotRequired[int]


def describe(sb: ManagedSandbox) -> dict[str, object]:
    """The JSON view of one managed sandbox (``pool``: the spec's pool, without the owner tag)."""
    h = sb.last_health
    return {
        "id": sb.id,
        "state": str(sb.state),
        "pool": base_pool(sb.pool),
        "backend": sb.backend.name,
        "image": sb.spec.image if sb.backend.name == "docker" else "",
        "generation": sb.generation,
        "restarts": sb.restarts,
        "sessions": sb.sessions,
        "max_sessions": sb.spec.max_sessions,
        "leased": sb.leased,
        "created_at": sb.created_at,
        "age_s": round(time.time() - sb.created_at, 3),
        "uptime_s": h.uptime_s if h else 0.0,
        "cpu_seconds": h.cpu_seconds if h else 0.0,
        "memory_bytes": h.memory_bytes if h else 0,
        "spec": {k: v for k, v in sb.spec.to_dict().items() if k != "env"},
    }


def snapshot(manager: SandboxManager) -> Counts:
    """Sandboxes by state and restarts summed over live sandboxes (health and metrics)."""
    by_state: dict[str, int] = {}
    restarts = 0
    for sb in manager.list():
        by_state[str(sb.state)] = by_state.get(str(sb.state), 0) + 1
        restarts += sb.restarts
    return {"by_state": by_state, "restarts": restarts}


def pool_views(
    manager: SandboxManager, pools: Mapping[str, PoolConfig], sandboxes: list[ManagedSandbox] | None = None
) -> list[dict[str, object]]:
    """Every pool: the configured ones (``pools``), custom envs' pools and user sandboxes; with ``sandboxes``,
    the members counted are those only (what one owner may see), and a pool none of them is in is left out
    unless it is configured."""
    members: dict[str, list[ManagedSandbox]] = {name: [] for name in pools}
    for sb in manager.list() if sandboxes is None else sandboxes:
        members.setdefault(base_pool(sb.pool), []).append(sb)
    out: list[dict[str, object]] = []
    for name, sbs in sorted(members.items()):
        pc = pools.get(name)
        out.append(
            {
                "name": name,
                "min_idle": pc.min_idle if pc else None,
                "max_total": pc.max_total if pc else None,
                "members": len(sbs),
                "ready": sum(1 for m in sbs if m.state == SandboxState.READY),
                "sessions": sum(m.sessions for m in sbs),
            }
        )
    return out
