"""The node agents of this deployment, as the control plane sees them, and where a session goes.

Each agent has an id, an endpoint (the base URL of its data plane) and a capacity (most sessions).
The embedded agent (``Settings.embedded_node``) runs inside this server on its sandboxes; a
standalone ``rockroll node`` registers itself with ``PUT /v1/nodes/{id}`` (the cluster secret as
its bearer token) and repeats it every ``HEARTBEAT_S`` seconds with its session count. An agent
not heard from for ``STALE_S`` seconds leaves placement until it registers again.

Placement: a session goes to the live agent with the most free capacity (the embedded agent
counted like the others); custom envs stay on this server's sandboxes, where their files are
provisioned (:mod:`rockroll.api.placement`). The table is in memory (a later slice keeps it in the
database for control-plane replicas).
"""

from __future__ import annotations

import hmac
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rockroll.api.errors import ApiError
from rockroll.sandbox.node.agent import NodeAgent
from rockroll.sandbox.node.remote import NodeAdmin

__all__ = ["NodeTable", "NodeEntry", "HEARTBEAT_S", "STALE_S"]

HEARTBEAT_S = 1.0
STALE_S = 5.0


@dataclass
class NodeEntry:
    """One node agent: where it is, how many sessions it takes and holds, when it last reported."""

    id: str
    endpoint: str
    capacity: int
    sessions: int = 0
    last_seen: float = field(default_factory=time.monotonic)
    local: NodeAgent | None = None  # the embedded agent itself
    admin: NodeAdmin | None = None  # how the control plane calls a standalone agent

    def live(self, now: float) -> bool:
        return self.local is not None or now - self.last_seen <= STALE_S

    def load(self) -> int:
        return len(self.local) if self.local is not None else self.sessions

    def view(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "endpoint": self.endpoint,
            "capacity": self.capacity,
            "sessions": self.load(),
            "embedded": self.local is not None,
            "live": self.live(now),
            "last_seen_s": 0.0 if self.local is not None else round(now - self.last_seen, 3),
        }


class NodeTable:
    """Registered node agents (thread-safe); see the module docstring."""

    def __init__(self, secret: str, local: NodeAgent | None = None) -> None:
        self._secret = secret
        self._nodes: dict[str, NodeEntry] = {}
        self._lock = threading.Lock()
        if local is not None:
            self._nodes[local.id] = NodeEntry(local.id, local.endpoint, local.capacity, local=local)

    def check_secret(self, presented: str) -> None:
        if not presented or not hmac.compare_digest(presented.encode(), self._secret.encode()):
            raise ApiError(401, "unauthorized", "a node agent registers with the deployment's cluster secret")

    def register(self, node_id: str, endpoint: str, capacity: int, sessions: int) -> NodeEntry:
        """Add or refresh a standalone agent."""
        with self._lock:
            entry = self._nodes.get(node_id)
            if entry is not None and entry.local is not None:
                raise ApiError(409, "conflict", f"node id {node_id!r} is this server's embedded node")
            if entry is None or entry.endpoint != endpoint:
                old = entry.admin if entry is not None else None
                entry = NodeEntry(node_id, endpoint, capacity, admin=NodeAdmin(endpoint, self._secret))
                self._nodes[node_id] = entry
                if old is not None:
                    old.close()
            entry.capacity, entry.sessions, entry.last_seen = capacity, sessions, time.monotonic()
            return entry

    def get(self, node_id: str) -> NodeEntry | None:
        return self._nodes.get(node_id)

    def pick(self) -> NodeEntry:
        """The live agent with the most free capacity; 503 when none has room."""
        now = time.monotonic()
        with self._lock:
            # the embedded agent is always a candidate: its sandboxes' own limits answer when it is full
            nodes = [n for n in self._nodes.values() if n.live(now) and (n.local is not None or n.load() < n.capacity)]
            best = max(nodes, key=lambda n: (n.capacity - n.load(), n.local is None), default=None)
            if best is None:
                raise ApiError(503, "no_node", "no node agent with free capacity is registered; start `rockroll node`")
            if best.local is None:
                best.sessions += 1  # counted until its next heartbeat reports it
            return best

    def mark_down(self, node_id: str) -> None:
        """Take a standalone agent out of placement until it registers again (it did not answer)."""
        entry = self._nodes.get(node_id)
        if entry is not None and entry.local is None:
            entry.last_seen = float("-inf")

    def views(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [n.view(now) for n in list(self._nodes.values())]

    def close(self) -> None:
        for n in list(self._nodes.values()):
            if n.admin is not None:
                n.admin.close()
