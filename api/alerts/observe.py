"""What the alert rules read, measured from the running control plane: one :class:`Observer` per app.

Counted quantities (step latency buckets, sandbox start failures, database size) are kept as short
series of ``(time, value)`` so the rules see how much each grew within ``alert_window_s``. Restarts
come from the sandbox manager's restart log, each tagged, when first seen, with the envs its
sandbox hosted and its owner; failed jobs from the jobs table; lost nodes from the node table.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections import deque
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from sqlalchemy import func, select, text

from rockroll.api.alerts.rules import Observation
from rockroll.api.db import Database, JobRecord, SandboxOwner
from rockroll.api.nodes.placement import Placement
from rockroll.api.nodes.table import NodeTable
from rockroll.api.sandboxes.owners import base_pool
from rockroll.api.server.auth import Principal
from rockroll.api.server.metrics import Metrics
from rockroll.api.server.settings import Settings
from rockroll.api.sessions.live import SessionRegistry
from rockroll.client.job_state import JobState

__all__ = ["Observer", "Platform", "Series", "p99_of"]

V = TypeVar("V", float, list[float])


class Platform(Protocol):
    """What the alerts read of the control plane (its :class:`rockroll.api.server.state.AppState`)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def db(self) -> Database: ...

    @property
    def placement(self) -> Placement: ...

    @property
    def sessions(self) -> SessionRegistry: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def nodes(self) -> NodeTable | None: ...


ADMIN = Principal(owner="", admin=True)


class Series(Generic[V]):
    """``(time, value)`` points of a growing quantity (a number, or a histogram's bucket counts), kept for
    ``window_s``; :meth:`growth` over it."""

    def __init__(self) -> None:
        self.points: deque[tuple[float, V]] = deque()

    def add(self, now: float, value: V, window_s: float) -> None:
        self.points.append((now, value))
        while len(self.points) > 2 and self.points[1][0] <= now - window_s:
            self.points.popleft()  # the oldest kept point is the last one at or before the window's start

    def growth(self) -> V | None:
        """The newest value less the oldest kept one (None with fewer than two points)."""
        if len(self.points) < 2:
            return None
        first, last = self.points[0][1], self.points[-1][1]
        if isinstance(first, list) and isinstance(last, list):
            return [b - a for a, b in zip(first, last, strict=True)]
        if isinstance(first, list) or isinstance(last, list):  # never: one series holds one kind of value
            raise TypeError("a series holds numbers or bucket counts, not both")
        return last - first


def p99_of(bounds: list[float], cumulative: list[float]) -> tuple[int, float]:
    """``(count, P99)`` of a histogram window: cumulative bucket counts (the last one +Inf) and their
    upper bounds; the P99 is the upper bound of the bucket it falls in (the largest finite one for +Inf)."""
    count = int(cumulative[-1]) if cumulative else 0
    if count <= 0:
        return 0, 0.0
    rank = 0.99 * count
    for bound, n in zip(bounds, cumulative, strict=True):
        if n >= rank:
            return count, bound if math.isfinite(bound) else max(b for b in bounds if math.isfinite(b))
    return count, 0.0


class Observer:
    """Builds an :class:`Observation` of the app state ``state`` (an :class:`rockroll.api.server.state.AppState`)."""

    def __init__(self, state: Platform) -> None:
        self.state = state
        self.steps: Series[list[float]] = Series()
        self.starts: Series[float] = Series()
        self.db_size: Series[float] = Series()
        self._tagged: dict[tuple[float, str], tuple[str, str]] = {}  # restart event -> (env, owner)
        now, window = time.time(), state.settings.alert_window_s  # the counters' baselines: before any request
        self.steps.add(now, self._step_buckets()[1], window)
        self.starts.add(now, self._start_failures(), window)

    def _start_failures(self) -> int:
        manager = self.state.placement.manager
        warm = getattr(getattr(manager, "warm", None), "counts", {})
        return getattr(manager, "start_failures", 0) + warm.get("failed", 0)

    def observe(self) -> Observation:
        st, settings = self.state, self.state.settings
        window, now = settings.alert_window_s, time.time()
        o = Observation(window_s=window)
        o.restarts = self._restarts(now - window)
        o.sandboxes_by_state = dict(st.placement.snapshot().get("by_state", {}))
        o.nodes_lost = {n["id"]: n["lost"] for n in (st.nodes.views() if st.nodes is not None else []) if n["lost"]}
        bounds, cumulative = self._step_buckets()
        self.steps.add(now, cumulative, window)
        o.step_count, o.step_p99_s = p99_of(bounds, self.steps.growth() or [0.0] * len(bounds))
        self.starts.add(now, self._start_failures(), window)
        o.start_failures = int(self.starts.growth() or 0)
        o.job_failures = self._job_failures(now - window)
        o.db_bytes = self._db_bytes()
        self.db_size.add(now, o.db_bytes, window)
        o.db_growth_bytes = max(0, int(self.db_size.growth() or 0))
        o.disk_free = self._disk_free()
        return o

    def _restarts(self, since: float) -> list[tuple[str, str]]:
        events = [e for e in list(self.state.placement.manager.restart_log) if e["time"] >= since]
        fresh = [e for e in events if (e["time"], e["sandbox_id"]) not in self._tagged]
        if fresh:
            sessions = self.state.sessions.list(ADMIN)
            with self.state.db.session() as s:
                ids = {e["sandbox_id"] for e in fresh}
                owners = dict(s.execute(select(SandboxOwner.sandbox_id, SandboxOwner.owner).where(
                    SandboxOwner.sandbox_id.in_(ids))).all())  # fmt: skip
            for e in fresh:
                on = [live for live in sessions if live.sandbox_id == e["sandbox_id"]]
                envs = sorted({live.env_id for live in on}) or [f"pool:{base_pool(e['pool'])}"]
                owner = owners.get(e["sandbox_id"]) or (on[0].owner if on else "")
                self._tagged[(e["time"], e["sandbox_id"])] = (",".join(envs), owner)
        kept = {(e["time"], e["sandbox_id"]) for e in events}
        self._tagged = {k: v for k, v in self._tagged.items() if k in kept}
        return [self._tagged[(e["time"], e["sandbox_id"])] for e in events]

    def _step_buckets(self) -> tuple[list[float], list[float]]:
        bounds, counts = [], []
        for metric in self.state.metrics.step_latency.collect():
            for sample in metric.samples:
                if sample.name.endswith("_bucket"):
                    bounds.append(float(sample.labels["le"]))
                    counts.append(sample.value)
        return bounds, counts

    def _job_failures(self, since: float) -> dict[str, int]:
        with self.state.db.session() as s:
            rows = s.execute(
                select(JobRecord.owner, func.count())
                .where(JobRecord.state == JobState.FAILED, JobRecord.finished_at >= since)
                .group_by(JobRecord.owner)
            ).all()
        return {owner: int(n) for owner, n in rows}

    def _sqlite_path(self) -> Path | None:
        url = self.state.settings.resolved_database_url()
        prefix = "sqlite:///"
        if url.startswith(prefix) and url[len(prefix) :] not in ("", ":memory:"):
            return Path(url[len(prefix) :])
        return None

    def _db_bytes(self) -> int:
        path = self._sqlite_path()
        if path is not None:
            return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
        try:
            with self.state.db.engine.connect() as conn:
                return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar() or 0)
        except Exception:  # noqa: BLE001 - another database: no size known
            return 0

    def _disk_free(self) -> dict[str, float]:
        settings = self.state.settings
        paths = [settings.sandbox_state_dir or f"/tmp/rockroll-sb-{os.getuid()}", str(settings.job_root())]
        db = self._sqlite_path()
        if db is not None:
            paths.append(str(db.parent))
        out = {}
        for path in dict.fromkeys(paths):
            try:
                usage = shutil.disk_usage(path)
            except OSError:
                continue
            out[path] = usage.free / usage.total if usage.total else 1.0
        return out
