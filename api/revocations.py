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
import threading
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import select

from rockroll.api.db import Database, TokenRecord
from rockroll.api.nodes import NodeEntry, NodeTable
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.node.agent import NodeAgent

__all__ = ["RevocationWatch", "POLL_S", "PUSH_TIMEOUT_S"]

log = logging.getLogger("rockroll.api")

POLL_S = 0.2
PUSH_TIMEOUT_S = 0.5


class RevocationWatch:
    """Tells the node agents about revoked API tokens (see the module docstring)."""

    def __init__(self, db: Database, nodes: NodeTable, agent: NodeAgent | None = None) -> None:
        self.db, self.nodes, self.agent = db, nodes, agent
        self._known: set[str] = set()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="revoke-push")
        self._thread = threading.Thread(target=self._loop, name="revocations", daemon=True)

    def start(self) -> None:
        self.check()  # the ones revoked before this start: no push needed, agents ask on their heartbeat
        self._thread.start()

    def check(self) -> list[str]:
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

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the watch must survive anything (a database hiccup)
                log.exception("revocation watch failed")

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
