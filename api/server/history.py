"""Histories the health page plots, kept in the database so a server restart does not lose them.

:class:`MetricHistory`: every numeric metrics report of each job, oldest first (the job record itself
keeps only the latest values). Points are written to ``api_job_metrics`` at most every
:data:`FLUSH_S` per job (and at once when the job ends); a job met after a restart is read back from
there. Bounded: ``max_points`` per job (evenly thinned beyond that, in memory and in the table, so a
long run keeps its whole shape) and, per owner, the newest ``max_jobs`` jobs: one owner's jobs never
push out another's (issue 48 item 4). Memory keeps the ``max_cached`` jobs met last (a job evicted has
its unsaved points written first, and is read back when met again).

:class:`RestartLog`: the sandbox manager's ``restart_log`` (each replacement and its reason, newest
last) with every new event also written to ``api_restarts`` under the manager's name, and read back at
start. It keeps the newest ``max_events`` of each owner (the sandbox's, from ``api_sandboxes``; ''
for sandboxes of nobody's): one owner's crashing sandboxes never push out another's restarts. Older rows
are deleted as new ones come.

A database error is logged and the in-memory history goes on: these are views, never the job's result.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.exc import SQLAlchemyError

from rockroll.api.db import Database, JobRecord, SandboxOwner
from rockroll.api.db.models import JobMetricPoint, RestartEvent
from rockroll.sandbox.manager import RestartEvent as SandboxRestart
from rockroll.sandbox.manager import SandboxManager

__all__ = ["MetricHistory", "RestartLog", "FLUSH_S"]

log = logging.getLogger("rockroll.api")

#: seconds between writes of one job's new points (a job reports many times a second at most)
FLUSH_S = 1.0


class MetricHistory:
    """The numeric metrics each job reported, oldest first: ``[{"t": unix time, "metrics": {...}}]``."""

    def __init__(
        self, db: Database | None = None, max_points: int = 500, max_jobs: int = 200, max_cached: int = 200
    ) -> None:
        self.db, self.max_points, self.max_jobs, self.max_cached = db, max_points, max_jobs, max_cached
        self._points: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._unsaved: dict[str, list[dict[str, Any]]] = {}
        self._saved_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, job_id: str, metrics: dict[str, Any], *, final: bool = False) -> None:
        """Record one report (its numbers only); ``final``: the job ended, write it out now."""
        numeric = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        thin = False
        if numeric:
            points = self._loaded(job_id)
            with self._lock:
                point = {"t": time.time(), "metrics": numeric}
                points.append(point)
                self._unsaved.setdefault(job_id, []).append(point)
                thin = len(points) > self.max_points
                if thin:
                    del points[1:-1:2]  # keep the first and the last, every other one between
        elif not final:
            return
        if final or thin or time.monotonic() - self._saved_at.get(job_id, 0.0) >= FLUSH_S:
            self._save(job_id, thin)

    def get(self, job_id: str) -> list[dict[str, Any]]:
        points = self._loaded(job_id)
        with self._lock:
            return list(points)

    def _loaded(self, job_id: str) -> list[dict[str, Any]]:
        """The job's points, read from the database the first time this server meets the job."""
        with self._lock:
            points = self._points.get(job_id)
            if points is not None:
                self._points.move_to_end(job_id)
                return points
        stored = self._read(job_id)
        evicted = []
        with self._lock:
            points = self._points.setdefault(job_id, stored)
            while len(self._points) > self.max_cached:
                old, _ = self._points.popitem(last=False)
                evicted.append((old, self._unsaved.pop(old, [])))
                self._saved_at.pop(old, None)
        for old, unsaved in evicted:  # read back from the table when met again: nothing may be left unwritten
            if unsaved:
                self._write(old, unsaved, None)
        return points

    def _read(self, job_id: str) -> list[dict[str, Any]]:
        if self.db is None:
            return []
        try:
            with self.db.session() as s:
                rows = s.execute(
                    select(JobMetricPoint.t, JobMetricPoint.metrics)
                    .where(JobMetricPoint.job_id == job_id)
                    .order_by(JobMetricPoint.id)
                    .limit(self.max_points)
                ).all()
        except SQLAlchemyError as e:
            log.warning("cannot read the metric history of job %s: %s", job_id, e)
            return []
        return [{"t": t, "metrics": dict(m or {})} for t, m in rows]

    def _save(self, job_id: str, thinned: bool) -> None:
        """Write the job's new points; after a thinning, the table is made the same as memory."""
        with self._lock:
            fresh = self._unsaved.pop(job_id, [])
            first = job_id not in self._saved_at  # a job new to the table: its owner's oldest job's rows may go
            self._saved_at[job_id] = time.monotonic()
            kept = list(self._points.get(job_id, ())) if thinned else None
        if fresh or kept is not None:
            self._write(job_id, fresh, kept, prune=first)

    def _write(
        self, job_id: str, fresh: list[dict[str, Any]], kept: list[dict[str, Any]] | None, prune: bool = False
    ) -> None:
        """Add ``fresh`` points to the table (``kept``: replace the job's rows with these instead)."""
        if self.db is None:
            return
        try:
            with self.db.session() as s:
                if kept is not None:  # few and rare: every max_points/2 reports
                    s.execute(delete(JobMetricPoint).where(JobMetricPoint.job_id == job_id))
                    fresh = kept
                s.add_all(JobMetricPoint(job_id=job_id, t=p["t"], metrics=p["metrics"]) for p in fresh)
            if prune:
                self._prune_jobs(job_id)
        except SQLAlchemyError as e:
            log.warning("cannot write the metric history of job %s: %s", job_id, e)

    def _prune_jobs(self, job_id: str) -> None:
        """Keep the histories of the newest ``max_jobs`` jobs (by their last point) of ``job_id``'s owner: other
        owners' are not touched (points of jobs without a record count as one more owner's)."""
        assert self.db is not None  # noqa: S101 - called only with a database
        with self.db.session() as s:
            owner = s.scalar(select(JobRecord.owner).where(JobRecord.id == job_id))
            q = select(JobMetricPoint.job_id).outerjoin(JobRecord, JobRecord.id == JobMetricPoint.job_id)
            q = q.where(JobRecord.id.is_(None)) if owner is None else q.where(JobRecord.owner == owner)
            older = q.group_by(JobMetricPoint.job_id).order_by(func.max(JobMetricPoint.t).desc()).offset(self.max_jobs)
            drop = [row[0] for row in s.execute(older)]
            if drop:
                s.execute(delete(JobMetricPoint).where(JobMetricPoint.job_id.in_(drop)))

    def watch(self, jobs: Any) -> None:
        """Record every metrics report of ``jobs`` (a :class:`rockroll.api.jobs.runner.JobRunner`) from now on."""
        update = jobs._update

        def recording_update(job_id: str, **changes: Any) -> None:
            update(job_id, **changes)
            final = changes.get("state") is not None
            if changes.get("metrics") or final:
                self.add(job_id, changes.get("metrics") or {}, final=final)

        jobs._update = recording_update


def _stored(event: dict[str, Any]) -> SandboxRestart:
    """A restart event as :meth:`RestartLog.append` wrote it."""
    return SandboxRestart(
        time=float(event.get("time", 0.0)), sandbox_id=str(event.get("sandbox_id", "")), pool=str(event.get("pool", "")),
        generation=int(event.get("generation", 0)), reason=str(event.get("reason", "")),
    )  # fmt: skip


def _event_owner() -> ColumnElement[str]:
    """The owner a stored restart event names ('' for rows written before owners were recorded)."""
    return func.coalesce(RestartEvent.event["owner"].as_string(), "")


class RestartLog(deque[SandboxRestart]):
    """A manager's ``restart_log`` whose new events are also written to ``api_restarts``, the newest
    ``max_events`` of each owner kept (module docstring); ``maxlen`` is that number, per owner."""

    def __init__(self, db: Database, manager: str, max_events: int = 500) -> None:
        super().__init__()
        self.db, self.manager, self.per_owner = db, manager, max_events
        self._owned: dict[str, deque[SandboxRestart]] = {}  # owner -> its events, oldest first
        self._lock = threading.Lock()
        try:
            with db.session() as s:  # every row: the table holds at most max_events per owner
                rows = s.scalars(
                    select(RestartEvent.event).where(RestartEvent.manager == manager).order_by(RestartEvent.id)
                ).all()
            for e in rows:
                self._keep(_stored(e or {}), str((e or {}).get("owner") or ""))
        except SQLAlchemyError as e:
            log.warning("cannot read the restart history of %s: %s", manager, e)

    @property
    def maxlen(self) -> int:
        """Events kept per owner."""
        return self.per_owner

    def append(self, event: SandboxRestart) -> None:
        owner = ""
        try:
            with self.db.session() as s:
                owner = (
                    s.scalar(select(SandboxOwner.owner).where(SandboxOwner.sandbox_id == event.get("sandbox_id"))) or ""
                )
                t = float(event.get("time", time.time()))
                s.add(RestartEvent(manager=self.manager, t=t, event={**event, "owner": owner}))
                s.flush()
                mine = (RestartEvent.manager == self.manager, _event_owner() == owner)
                oldest_kept = (
                    (
                        select(RestartEvent.id)
                        .where(*mine)
                        .order_by(RestartEvent.id.desc())
                        .offset(max(self.per_owner - 1, 0))
                    )
                    .limit(1)
                    .scalar_subquery()
                )
                s.execute(delete(RestartEvent).where(*mine, RestartEvent.id < oldest_kept))
        except SQLAlchemyError as e:
            log.warning("cannot record the restart of %s: %s", event.get("sandbox_id"), e)
        self._keep(event, owner)

    def _keep(self, event: SandboxRestart, owner: str) -> None:
        """Add ``event`` of ``owner`` in memory, dropping that owner's oldest beyond ``max_events``."""
        with self._lock:
            mine = self._owned.setdefault(owner, deque())
            mine.append(event)
            super().append(event)
            while len(mine) > self.per_owner:
                old = mine.popleft()
                try:
                    super().remove(old)
                except ValueError:  # cleared meanwhile
                    pass

    @classmethod
    def install(cls, db: Database, manager: SandboxManager) -> RestartLog:
        """Replace ``manager.restart_log`` with one kept in ``db`` (events logged so far carried over)."""
        restored = cls(db, manager.config.name, max_events=manager.restart_log.maxlen or 500)
        for event in list(manager.restart_log):
            restored.append(event)
        manager.restart_log = restored
        return restored
