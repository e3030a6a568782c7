"""Find node agents that died or went silent, and declare them lost (their sessions answer 410).

:class:`NodeWatch` runs one thread in the control plane. Every :data:`TICK_S` it looks at each
standalone agent's last heartbeat: an agent silent for more than :data:`SUSPECT_S` (two missed
beats) is asked ``GET /v1/node/health`` with a :data:`PROBE_TIMEOUT_S` limit. When that fails (the
port is closed: the agent died; no answer in time: it hangs; another agent's id answers: it was
replaced) the agent is declared lost (:meth:`rockroll.api.nodes.table.NodeTable.lose`). A SIGKILLed agent
is so lost within ``SUSPECT_S + TICK_S + PROBE_TIMEOUT_S`` (under 4 s) of its last heartbeat.

Heartbeats that reached another control-plane replica count: each tick first reads the agents' rows
(:meth:`rockroll.api.nodes.table.NodeTable.sync`).

An agent that still answers its probe but whose heartbeats do not arrive (it cannot reach the
control plane) is not lost: its sessions keep working on the data plane; it only leaves placement
after ``STALE_S`` (:mod:`rockroll.api.nodes.table`).
"""

from __future__ import annotations

import time

import httpx

from rockroll.api.nodes.table import HEARTBEAT_S, NodeEntry, NodeTable
from rockroll.api.server.periodic import Periodic

__all__ = ["NodeWatch", "probe", "SUSPECT_S", "TICK_S", "PROBE_TIMEOUT_S"]

SUSPECT_S = 2 * HEARTBEAT_S
TICK_S = 0.25
PROBE_TIMEOUT_S = 1.0


def probe(entry: NodeEntry, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """'' when the agent of ``entry`` answers its health route as itself, else why not."""
    try:
        resp = httpx.get(f"{entry.endpoint}/v1/node/health", timeout=timeout_s)
        answered = resp.json().get("id") if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError) as e:
        return f"its health probe failed ({type(e).__name__})"
    if answered != entry.id:
        return f"its endpoint answers as {answered!r} now"
    return ""


class NodeWatch(Periodic):
    """Declares silent agents lost once they fail a probe (see the module docstring)."""

    interval_s, name = TICK_S, "node-watch"

    def __init__(self, nodes: NodeTable) -> None:
        super().__init__()
        self.nodes = nodes

    def start(self) -> None:
        self.start_ticking()

    def tick(self) -> list[str]:
        """One round: read the agents' rows (other replicas' heartbeats and losses), probe the silent
        agents; return the ids declared lost."""
        self.nodes.sync()
        lost = []
        for entry in self.nodes.standalone():
            silent = time.monotonic() - entry.last_seen
            if silent <= SUSPECT_S:
                continue
            why = probe(entry)
            if why and time.monotonic() - entry.last_seen > SUSPECT_S:  # no heartbeat came during the probe
                reason = f"node {entry.id} stopped answering: no heartbeat for {silent:.1f} s and {why}"
                if self.nodes.lose(entry.id, reason, endpoint=entry.endpoint):
                    lost.append(entry.id)
        return lost

    def close(self) -> None:
        self.stop_ticking()
