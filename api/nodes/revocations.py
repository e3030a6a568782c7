"""Revoked API tokens reach the node agents, and so the open data-plane sockets, within a second.

``rockroll token revoke`` writes the database (maybe from another process), so the control plane
looks: :class:`RevocationWatch` reads the ids of revoked tokens every :data:`POLL_S`. New ones are
told at once to the embedded agent (a call) and pushed to every standalone agent
(``POST /v1/node/admin/revoked``, :data:`PUSH_TIMEOUT_S` each, in parallel); each agent then refuses
session tokens asked with them and closes the sockets opened with them
(:meth:`rockroll.sandbox.node.agent.NodeAgent.revoke`). The whole list also rides on every heartbeat
answer (``NodeTable.revoked``), so an agent that missed a push, or joins later, catches up within a
heartbeat.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import select

from rockroll.api.db import Database, TokenRecord
from rockroll.api.nodes.table import NodeEntry, NodeTable
from rockroll.api.server.periodic import Periodic
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.node.agent import NodeAgent

__all__ = ["RevocationWatch", "POLL_S", "PUSH_TIMEOUT_S"]

log = logging.getLogger("rockroll.api")

POLL_S = 0.2
PUSH_TIMEOUT_S = 0.5


class RevocationWatch(Periodic):
    """Tells the node agents about revoked API tokens (see the module docstring)."""

    interval_s, name = POLL_S, "revocations"

    def __init__(self, db: Database, nodes: NodeTable, agent: NodeAgent | None = None) -> None:
        super().__init__()
        self.db, self.nodes, self.agent = db, nodes, agent
        self._known: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="revoke-push")

    def start(self) -> None:
        self.tick()  # the ones revoked before this start
        self.start_ticking()

    def tick(self) -> list[str]:
        """Read the revoked ids; tell the agents about new ones; return those."""
        with self.db.session() as s:
            revoked = set(s.scalars(select(TokenRecord.id).where(TokenRecord.revoked)))
        new = sorted(revoked - self._known)
        if not new:
            return []
        self._known |= revoked
        self.nodes.revoked = sorted(self._known)
        if self.agent is not None:
            self.agent.revoke(new)
        for entry in self.nodes.standalone():
            self._pool.submit(self._push, entry, new)
        return new

    @staticmethod
    def _push(entry: NodeEntry, ids: list[str]) -> None:
        if entry.admin is None:
            return
        try:
            entry.admin.request("POST", "/revoked", {"token_ids": ids}, timeout_s=PUSH_TIMEOUT_S)
        except SandboxError as e:  # it learns them from its next heartbeat answer
            log.warning("cannot tell node agent %s about revoked tokens: %s", entry.id, e)

    def close(self) -> None:
        self.stop_ticking()
        self._pool.shutdown(wait=False, cancel_futures=True)
