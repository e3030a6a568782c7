"""The node agents of this deployment, as the control plane sees them, and where a session goes.

Each agent has an id, an endpoint (the base URL of its data plane) and a capacity (most sessions).
The embedded agent (``Settings.embedded_node``) runs inside this server on its sandboxes; a
standalone ``rockroll node`` registers itself with ``PUT /v1/nodes/{id}`` (the cluster secret as
its bearer token) and repeats it every ``HEARTBEAT_S`` seconds with its session count. An agent
not heard from for ``STALE_S`` seconds leaves placement until it registers again.

An agent that died is *lost* (:meth:`NodeTable.lose`, called by :mod:`rockroll.api.node_watch`
when an agent stops answering, or by :mod:`rockroll.api.ray_nodes` when its Ray node leaves): its
sessions answer ``410 session_lost`` with the reason from then on, even if it comes back. When it
registers again it is a new entry, back in placement, and is told to drop any session it still
holds (``forget_sessions``: the control plane has given them up).

Placement: a session goes to the live agent with the most free capacity (the embedded agent
counted like the others); custom envs stay on this server's sandboxes, where their files are
provisioned (:mod:`rockroll.api.placement`). The table is in memory (a later slice keeps it in the
database for control-plane replicas).
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rockroll.api.errors import ApiError
from rockroll.sandbox.node.agent import NodeAgent
from rockroll.sandbox.node.remote import NodeAdmin

__all__ = ["NodeTable", "NodeEntry", "HEARTBEAT_S", "STALE_S"]

log = logging.getLogger("rockroll.api")

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
    lost: str = ""  # why it was declared lost ('' while it serves)
    boot: str = ""  # the agent process's id, from its registration (another one: it restarted)

    def live(self, now: float) -> bool:
        return self.local is not None or (not self.lost and now - self.last_seen <= STALE_S)

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
            "lost": self.lost,
            "last_seen_s": 0.0 if self.local is not None else round(now - self.last_seen, 3),
        }


class NodeTable:
    """Registered node agents (thread-safe); see the module docstring."""

    def __init__(self, secret: str, local: NodeAgent | None = None) -> None:
        self._secret = secret
        self._nodes: dict[str, NodeEntry] = {}
        self._lock = threading.Lock()
        self.revoked: list[str] = []  # ids of revoked API tokens, told to agents (rockroll.api.revocations)
        if local is not None:
            self._nodes[local.id] = NodeEntry(local.id, local.endpoint, local.capacity, local=local)

    def check_secret(self, presented: str) -> None:
        if not presented or not hmac.compare_digest(presented.encode(), self._secret.encode()):
            raise ApiError(401, "unauthorized", "a node agent registers with the deployment's cluster secret")

    def register(
        self, node_id: str, endpoint: str, capacity: int, sessions: int, boot: str = ""
    ) -> tuple[NodeEntry, bool]:
        """Add or refresh a standalone agent; also whether it rejoins after it was lost (it should drop
        the sessions it holds). ``boot`` names the agent's process: another one means it restarted."""
        with self._lock:
            entry = self._nodes.get(node_id)
            if entry is not None and entry.local is not None:
                raise ApiError(409, "conflict", f"node id {node_id!r} is this server's embedded node")
            rejoined = entry is not None and bool(entry.lost)
            restarted = entry is not None and (entry.endpoint != endpoint or entry.boot != boot)
            if entry is None or restarted or entry.lost:
                if entry is not None and entry.admin is not None:  # its sessions stay lost (410)
                    entry.admin.lose(entry.lost or f"node {node_id} restarted, its sessions went with it")
                    entry.admin.close()
                admin = NodeAdmin(endpoint, self._secret, node_id=node_id)
                entry = NodeEntry(node_id, endpoint, capacity, admin=admin, boot=boot)
                self._nodes[node_id] = entry
            entry.capacity, entry.sessions, entry.last_seen = capacity, sessions, time.monotonic()
            return entry, rejoined

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

    def lose(self, node_id: str, reason: str, *, endpoint: str | None = None) -> bool:
        """Declare a standalone agent lost (see the module docstring); False when it is unknown or lost already.

        With ``endpoint``, only the agent registered at that endpoint (not one that has rejoined since).
        """
        with self._lock:
            entry = self._nodes.get(node_id)
            if entry is None or entry.local is not None or entry.lost:
                return False
            if endpoint is not None and entry.endpoint != endpoint:
                return False
            entry.lost = reason
            if entry.admin is not None:
                entry.admin.lose(reason)
        log.warning("node agent %s lost: %s", node_id, reason)
        return True

    def standalone(self) -> list[NodeEntry]:
        """The registered standalone agents not declared lost."""
        return [n for n in list(self._nodes.values()) if n.local is None and not n.lost]

    def views(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [n.view(now) for n in list(self._nodes.values())]

    def close(self) -> None:
        for n in list(self._nodes.values()):
            if n.admin is not None:
                n.admin.close()
