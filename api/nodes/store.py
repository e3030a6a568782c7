"""The node agents' rows in the database (``api_nodes``): what every control-plane replica shares.

:class:`NodeStore` is the whole of it: a registration writes the agent's row (endpoint, capacity,
sessions, boot id, wall-clock heartbeat); a loss sets its ``lost`` reason once; each replica reads all
rows every tick (:meth:`NodeStore.rows`) to learn of agents that heartbeat to another replica and of
losses another replica declared. See :mod:`rockroll.api.nodes.table`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import select, update

from rockroll.api.db import Database, NodeRecord
from rockroll.sandbox.db import rowcount

__all__ = ["NodeStore", "NodeRow"]


@dataclass(frozen=True)
class NodeRow:
    """One agent's row, detached from the database session."""

    id: str
    endpoint: str
    capacity: int
    sessions: int
    boot: str
    heartbeat_at: float
    lost: str


class NodeStore:
    """Reads and writes ``api_nodes`` (see the module docstring)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, node_id: str) -> NodeRow | None:
        with self.db.session() as s:
            rec = s.get(NodeRecord, node_id)
            return None if rec is None else _row(rec)

    def rows(self) -> list[NodeRow]:
        with self.db.session() as s:
            return [_row(rec) for rec in s.scalars(select(NodeRecord))]

    def heartbeat(self, node_id: str, endpoint: str, capacity: int, sessions: int, boot: str) -> NodeRow | None:
        """Write the agent's registration (no longer lost); return its row as it was before (None: new)."""
        now = time.time()
        with self.db.session() as s:
            rec = s.get(NodeRecord, node_id, with_for_update=True)
            before = None if rec is None else _row(rec)
            if rec is None:
                s.add(NodeRecord(id=node_id, endpoint=endpoint, capacity=capacity, sessions=sessions, boot=boot,
                                 heartbeat_at=now, lost=""))  # fmt: skip
            else:
                rec.endpoint, rec.capacity, rec.sessions, rec.boot = endpoint, capacity, sessions, boot
                rec.heartbeat_at, rec.lost = now, ""
        return before

    def lose(self, node_id: str, reason: str, *, endpoint: str | None = None, boot: str | None = None) -> bool:
        """Set the agent's ``lost`` reason unless it is lost already; False when nothing changed.

        ``endpoint`` / ``boot``: only the agent registered there / that process (not one that rejoined since).
        """
        query = update(NodeRecord).where(NodeRecord.id == node_id, NodeRecord.lost == "")
        if endpoint is not None:
            query = query.where(NodeRecord.endpoint == endpoint)
        if boot is not None:
            query = query.where(NodeRecord.boot == boot)
        with self.db.session() as s:
            return bool(rowcount(s.execute(query.values(lost=reason[:2000]))))


def _row(rec: NodeRecord) -> NodeRow:
    return NodeRow(rec.id, rec.endpoint, rec.capacity, rec.sessions, rec.boot, rec.heartbeat_at, rec.lost)
