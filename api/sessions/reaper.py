"""The idle reaper and the shutdown of :class:`~rockroll.api.sessions.live.SessionRegistry` (a mixin it inherits).

Split from :mod:`rockroll.api.sessions.live`, whose docstring tells which sessions outlive the server: the reaper
closes sessions idle for a while (adopting the orphans of a replica that is gone, so they are reaped too);
``close_all`` closes this server's own env sessions at shutdown and leaves their records open. A reaper pass
lists each standalone agent's sessions once: settling the orphans' rows and closing what no open row stands
for read the same listing.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from rockroll.api.db import Database, SessionRecord
from rockroll.api.nodes.table import NodeEntry, NodeTable
from rockroll.api.sessions.records import LiveSession, open_on_nodes, record_close, rows_of
from rockroll.sandbox.lease import tag_live
from rockroll.sandbox.node.agent import NodeAgent
from rockroll.sandbox.node.remote import NodeSession

__all__ = ["LiveSession", "SessionReaping"]

log = logging.getLogger("rockroll.api")


class SessionReaping:
    """Reaping and shutdown of the sessions of a registry (its attributes are :class:`SessionRegistry`'s)."""

    db: Database
    agent: NodeAgent | None
    nodes: NodeTable | None
    server: str
    _live: dict[str, LiveSession]
    _lock: threading.Lock
    _pool: ThreadPoolExecutor
    _stop: threading.Event
    _unrecorded: set[str]

    if TYPE_CHECKING:  # SessionRegistry's own

        def close(self, live: LiveSession) -> None: ...

        def _adopt(self, rec: SessionRecord, entry: NodeEntry) -> LiveSession: ...

        def _abandon(self, rec: SessionRecord) -> None: ...

    def reap_idle(self, ttl_s: float) -> int:
        """Close sessions unused for ``ttl_s`` seconds; return how many were closed."""
        if self.nodes is not None and self.nodes.store is not None:  # the standalone agents, listed once a pass
            serving = {n.id: n for n in self.nodes.standalone()}
            self.reconcile_agents(serving, self._adopt_orphans(serving))
        cutoff = time.monotonic() - ttl_s
        idle = [live for live in list(self._live.values()) if _last_used(live) < cutoff]
        for live in idle:
            try:
                self.close(live)
            except Exception:  # noqa: BLE001 - a failed close must not stop the reaper
                continue
        return len(idle)

    def _adopt_orphans(self, serving: dict[str, NodeEntry]) -> dict[str, set[str]]:
        """Adopt the sessions on the agents ``serving`` whose opening server holds no lease now (so they are
        reaped); return what each agent holds (listed once, after the rows are read)."""
        recs = [rec for rec in open_on_nodes(self.db, None, list(serving)) if rec.id not in self._live]
        live_servers = tag_live(self.db.engine, sorted({rec.server for rec in recs} - {self.server}))
        held = self._held(set(serving), serving)
        self._settle([r for r in recs if r.server != self.server and r.server not in live_servers], serving, held)
        return held

    def reconcile_agents(self, serving: dict[str, NodeEntry], held: dict[str, set[str]]) -> int:
        """Close, at each agent of ``serving``, the sessions it holds (``held``, the pass's listing) that no open
        row stands for; return how many.

        A row closed while its agent still holds the session is a close (or a give-up) whose call to the
        agent failed; an id with no row on two passes in a row is a fork whose recording was cut off (a
        row is written before an open reaches an agent, so an open never lacks one). An agent that does not
        answer (absent from ``held``) is reconciled on a later pass."""
        closed = 0
        seen: set[str] = set()
        for node_id, ids in held.items():
            admin = serving[node_id].admin
            assert admin is not None  # listed: a standalone agent's entry
            rows = rows_of(self.db, ids)
            missing = {sid for sid in ids if sid not in rows}
            seen |= missing
            stray = [sid for sid in ids if (sid in rows and rows[sid].closed_at is not None)]
            stray += sorted(missing & self._unrecorded)
            for sid in stray:
                NodeSession(admin, {"session_id": sid}).close()  # never raises
            closed += len(stray)
        self._unrecorded = seen
        return closed

    def _settle(
        self,
        recs: list[SessionRecord],
        serving: dict[str, NodeEntry],
        held: dict[str, set[str]] | None = None,
    ) -> None:
        """Adopt other replicas' confirmed sessions on the agents ``serving``; give up the opens that a
        replica now gone left unconfirmed (cut off mid-open: no session to list, maybe one at the agent).
        ``held``: what the agents hold (:meth:`_held`), when the caller listed them already (the reaper's pass;
        a session given up here is taken out of it)."""
        others = sorted({r.server for r in recs if r.server} - {self.server})
        live = tag_live(self.db.engine, others) if others else set()
        gone = [r for r in recs if r.server and r.server != self.server and r.server not in live]
        nodes = {r.node_id for r in gone if r.sandbox_id}
        held = self._held(nodes, serving) if held is None else held
        for node_id in sorted(nodes - held.keys()):
            if node_id in serving and serving[node_id].admin is not None:  # it did not answer
                log.warning("node %s: could not list its sessions", node_id)
        for rec in recs:
            if rec in gone and not rec.sandbox_id:
                self._abandon(rec)  # an open still under way (here or at a live replica) is left to its opener
                held.get(rec.node_id, set()).discard(rec.id)
            elif rec in gone and rec.node_id in held and rec.id not in held[rec.node_id]:
                record_close(
                    self.db, rec.id, rec.steps
                )  # closed at its agent by a replica that died before recording it
            elif rec.sandbox_id:
                self._adopt(rec, serving[rec.node_id])

    @staticmethod
    def _held(node_ids: set[str], serving: dict[str, NodeEntry]) -> dict[str, set[str]]:
        """The session ids each agent of ``node_ids`` holds (agents that do not answer are left out)."""
        held: dict[str, set[str]] = {}
        for node_id in sorted(node_ids):
            entry = serving.get(node_id)
            admin = entry.admin if entry is not None else None
            if admin is None:
                continue
            try:
                held[node_id] = admin.session_ids()
            except Exception:  # noqa: BLE001 - an agent that does not answer: its rows are adopted as before
                continue
        return held

    def start_reaper(self, ttl_s: float, interval_s: float = 30.0) -> None:
        """Run :meth:`reap_idle` every ``interval_s`` seconds on a daemon thread."""

        def loop() -> None:
            while not self._stop.wait(interval_s):
                self.reap_idle(ttl_s)

        threading.Thread(target=loop, name="session-reaper", daemon=True).start()

    def close_all(self) -> None:
        """Server shutdown: close every env session in its sandbox, leaving its record open (so 410 later)."""
        self._stop.set()
        for live in list(self._live.values()):
            with self._lock:
                self._live.pop(live.id, None)
            if live.entry is not None and self.agent is not None:
                self.agent.detach(live.id)
            try:
                if isinstance(live.remote, NodeSession):  # on a node agent: it outlives this server
                    record_close(self.db, live.id, live.steps, closed=False)
                    continue
                live.remote.close()
                record_close(self.db, live.id, live.steps, closed=False)
            except Exception:  # noqa: BLE001 - shutting down
                pass
        self._pool.shutdown(wait=False, cancel_futures=True)


def _last_used(live: LiveSession) -> float:
    """When ``live`` was last used on either plane (steps at a node agent do not pass here)."""
    if live.entry is not None:  # the embedded agent's record
        live.last_used = max(live.last_used, live.entry.last_used)
    elif hasattr(live.remote, "idle_s") and live.last_used < time.monotonic() - 1.0:
        try:  # a standalone agent's record, asked only of sessions idle here
            live.last_used = max(live.last_used, time.monotonic() - float(live.remote.idle_s()))
        except Exception:  # noqa: BLE001 - an agent that does not answer: the session counts as idle
            pass
    return live.last_used
