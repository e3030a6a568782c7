"""The node agents of this deployment, as the control plane sees them, and where a session goes.

Each agent has an id, an endpoint (the base URL of its data plane) and a capacity (most sessions).
The embedded agent (``Settings.embedded_node``) runs inside this server on its sandboxes; a
standalone ``rockroll serve-node`` registers itself with ``PUT /v1/nodes/{id}`` (the cluster secret as
its bearer token) and repeats it every ``HEARTBEAT_S`` seconds with its session count. An agent
not heard from for ``STALE_S`` seconds leaves placement until it registers again.

An agent that died is *lost* (:meth:`NodeTable.lose`, called by :mod:`rockroll.api.nodes.watch`
when an agent stops answering, or by :mod:`rockroll.api.nodes.ray` when its Ray node leaves): its
sessions answer ``410 session_lost`` with the reason from then on, even if it comes back. When it
registers again it is a new entry, back in placement, and is told to drop any session it still
holds (``forget_sessions``: the control plane has given them up).

Placement: a session goes to the live agent with the most free capacity (the embedded agent
counted like the others), and a rollout group's sessions spread over agents first (anti-affinity:
the agent holding the fewest of the group's open sessions wins; ``avoid`` names agents a hedged
copy should stay off). Custom envs stay on this server's sandboxes, where their files are
provisioned (:mod:`rockroll.api.nodes.placement`).

Shared by replicas: the standalone agents are rows of the database (:mod:`rockroll.api.nodes.store`).
A registration writes its row; a loss sets the row's reason once; every tick of the node watch,
:meth:`NodeTable.sync` reads the rows, so each control-plane replica knows the agents that heartbeat
to another replica (their last heartbeat, their sessions) and the losses another replica declared.
A restarted control plane finds its agents there too, so their sessions outlive it.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from rockroll.api.nodes.store import NodeRow, NodeStore
from rockroll.api.server.errors import ApiError
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
    beat_at: float = 0.0  # wall-clock time of the newest heartbeat known (here or in the database)

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

    def __init__(self, secret: str, local: NodeAgent | None = None, store: NodeStore | None = None) -> None:
        self._secret = secret
        self._nodes: dict[str, NodeEntry] = {}
        self._lock = threading.Lock()
        self.store = store
        self.revoked: list[str] = []  # ids of revoked API tokens, told to agents (rockroll.api.nodes.revocations)
        if local is not None:
            self._nodes[local.id] = NodeEntry(local.id, local.endpoint, local.capacity, local=local)

    def check_secret(self, presented: str) -> None:
        if not presented or not hmac.compare_digest(presented.encode(), self._secret.encode()):
            raise ApiError(401, "unauthorized", "a node agent registers with the deployment's cluster secret")

    def _replace(self, entry: NodeEntry | None, node_id: str, endpoint: str, boot: str) -> NodeEntry:
        """A fresh entry for a (re)started or rejoining agent; the old one's sessions stay lost (410)."""
        if entry is not None and entry.admin is not None:
            entry.admin.lose(entry.lost or f"node {node_id} restarted, its sessions went with it")
            entry.admin.close()
        admin = NodeAdmin(endpoint, self._secret, node_id=node_id)
        fresh = NodeEntry(node_id, endpoint, 0, admin=admin, boot=boot, last_seen=float("-inf"))
        self._nodes[node_id] = fresh
        return fresh

    def register(
        self, node_id: str, endpoint: str, capacity: int, sessions: int, boot: str = ""
    ) -> tuple[NodeEntry, bool]:
        """Add or refresh a standalone agent; also whether it rejoins after it was lost (it should drop
        the sessions it holds). ``boot`` names the agent's process: another one means it restarted."""
        local = self._nodes.get(node_id)
        if local is not None and local.local is not None:
            raise ApiError(409, "conflict", f"node id {node_id!r} is this server's embedded node")
        # the database write outside the table's lock: placement (pick) never waits on it
        before = self.store.heartbeat(node_id, endpoint, capacity, sessions, boot) if self.store else None
        with self._lock:
            entry = self._nodes.get(node_id)
            rejoined = (entry is not None and bool(entry.lost)) or (before is not None and bool(before.lost))
            restarted = entry is not None and (entry.endpoint != endpoint or entry.boot != boot)
            if entry is None or restarted or entry.lost:
                entry = self._replace(entry, node_id, endpoint, boot)
            entry.capacity, entry.sessions, entry.last_seen = capacity, sessions, time.monotonic()
            entry.beat_at = time.time()
            return entry, rejoined

    def sync(self) -> None:
        """Learn the agents and losses recorded by other replicas (see the module docstring)."""
        if self.store is None:
            return
        rows = self.store.rows()
        now_wall, now_mono = time.time(), time.monotonic()
        with self._lock:
            for row in rows:
                self._merge(row, now_wall, now_mono)

    def _merge(self, row: NodeRow, now_wall: float, now_mono: float) -> None:
        entry = self._nodes.get(row.id)
        if entry is not None and entry.local is not None:
            return
        newer = entry is None or row.heartbeat_at > entry.beat_at
        moved = entry is not None and (entry.boot != row.boot or entry.endpoint != row.endpoint)
        if entry is None or (newer and moved) or (newer and entry.lost and not row.lost):
            entry = self._replace(entry, row.id, row.endpoint, row.boot)
        if row.heartbeat_at > entry.beat_at:
            entry.beat_at, entry.capacity, entry.sessions = row.heartbeat_at, row.capacity, row.sessions
            entry.last_seen = max(entry.last_seen, now_mono - max(0.0, now_wall - row.heartbeat_at))
        if row.lost and not entry.lost and row.boot == entry.boot:
            entry.lost = row.lost
            if entry.admin is not None:
                entry.admin.lose(row.lost)

    def get(self, node_id: str) -> NodeEntry | None:
        """The agent ``node_id`` (read from the database when this replica has not met it yet)."""
        entry = self._nodes.get(node_id)
        if entry is None and self.store is not None and node_id:
            self.sync()
            entry = self._nodes.get(node_id)
        return entry

    def pick(self, spread: Mapping[str, int] | None = None, avoid: Collection[str] = ()) -> NodeEntry:
        """The live agent with room that holds the fewest of ``spread``'s sessions (a rollout group's, by
        agent), then has the most free capacity; agents in ``avoid`` only when no other has room. 503
        when none has room."""
        now = time.monotonic()
        spread = spread or {}
        with self._lock:
            # the embedded agent is always a candidate: its sandboxes' own limits answer when it is full
            nodes = [n for n in self._nodes.values() if n.live(now) and (n.local is not None or n.load() < n.capacity)]
            preferred = [n for n in nodes if n.id not in avoid] or nodes
            best = min(
                preferred,
                key=lambda n: (spread.get(n.id, 0), -(n.capacity - n.load()), n.local is not None),
                default=None,
            )
            if best is None:
                raise ApiError(
                    503, "no_node", "no node agent with free capacity is registered; start `rockroll serve-node`"
                )
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
            declared = True
            if self.store is not None and not self.store.lose(
                node_id, reason, endpoint=entry.endpoint, boot=entry.boot
            ):
                row = self.store.get(node_id)  # another replica declared it lost first, or it rejoined since
                if row is None or not row.lost or row.boot != entry.boot:
                    return False
                reason, declared = row.lost, False
            entry.lost = reason
            if entry.admin is not None:
                entry.admin.lose(reason)
        if not declared:
            return False
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
