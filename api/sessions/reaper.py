"""The idle reaper and the shutdown of :class:`~rockroll.api.sessions.live.SessionRegistry` (a mixin it inherits).

Split from :mod:`rockroll.api.sessions.live`, whose docstring tells which sessions outlive the server: the reaper
closes sessions idle for a while (adopting the orphans of a replica that is gone, so they are reaped too);
``close_all`` closes this server's own env sessions at shutdown and leaves their records open.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rockroll.api.db import Database
from rockroll.api.sessions.records import open_on_nodes, record_close
from rockroll.sandbox.lease import tag_live
from rockroll.sandbox.node.remote import NodeSession
from rockroll.sandbox.session import EnvSession

__all__ = ["LiveSession", "SessionReaping"]


@dataclass
class LiveSession:
    """One open session."""

    id: str
    owner: str
    env_id: str
    kwargs: dict[str, Any]
    remote: EnvSession  # a RemoteSession (this server's sandboxes) or a NodeSession (a standalone node agent)
    created_at: float = field(default_factory=time.time)
    steps: int = 0
    last_used: float = field(default_factory=time.monotonic)
    node: str = ""  # the node agent serving it ("" when none: stepped through the control plane only)
    entry: Any = None  # its AgentSession on the embedded node agent (steps numbered there)

    @property
    def sandbox_id(self) -> str:
        return self.remote.sandbox_id

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "owner": self.owner,
            "env": self.env_id,
            "sandbox_id": self.sandbox_id,
            "steps": self.steps,
            "created_at": self.created_at,
            "system_prompt": self.remote.system_prompt(),
        }


class SessionReaping:
    """Reaping and shutdown of the sessions of a registry (its attributes are :class:`SessionRegistry`'s)."""

    db: Database
    agent: Any
    nodes: Any
    server: str
    _live: dict[str, LiveSession]
    _lock: threading.Lock
    _pool: ThreadPoolExecutor
    _stop: threading.Event

    if TYPE_CHECKING:  # SessionRegistry's own

        def close(self, live: LiveSession) -> None: ...

        def _adopt(self, rec: Any, entry: Any) -> LiveSession: ...

        def _settle(self, recs: list[Any], serving: dict[str, Any]) -> None: ...

    def reap_idle(self, ttl_s: float) -> int:
        """Close sessions unused for ``ttl_s`` seconds; return how many were closed."""
        self._adopt_orphans()
        cutoff = time.monotonic() - ttl_s
        idle = [live for live in list(self._live.values()) if _last_used(live) < cutoff]
        for live in idle:
            try:
                self.close(live)
            except Exception:  # noqa: BLE001 - a failed close must not stop the reaper
                continue
        return len(idle)

    def _adopt_orphans(self) -> None:
        """Adopt the sessions on node agents whose opening server holds no lease now (so they are reaped)."""
        if self.nodes is None or self.nodes.store is None:
            return
        serving = {n.id: n for n in self.nodes.standalone()}
        recs = [rec for rec in open_on_nodes(self.db, None, list(serving)) if rec.id not in self._live]
        live_servers = tag_live(self.db.engine, sorted({rec.server for rec in recs} - {self.server}))
        self._settle([r for r in recs if r.server != self.server and r.server not in live_servers], serving)

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
            if live.entry is not None:
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
