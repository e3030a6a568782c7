"""Per-owner caps on jobs (issue 48 items 3, 4): what one owner may store, hold and run.

The operator sets them in :class:`rockroll.api.server.settings.Settings`; ``job_owner_caps`` gives single
owners values of their own (raised or lowered). They bind admins too, as the sandbox caps do
(:mod:`rockroll.api.server.caps`):

* a job config (its JSON as sent) over ``max_job_config_bytes`` (1 MiB) answers 413 ``too_large``;
* a train job's ``total_steps`` over ``max_job_total_steps``, an eval job's episodes (over all its
  envs; a tag's entry once per env carrying it) over ``max_job_episodes`` answer 422 ``over_cap``;
* an owner with ``max_active_jobs_per_owner`` (8) jobs queued or running gets 429 ``capacity``;
* an owner keeps ``max_kept_jobs_per_owner`` (1,000) jobs: a new one deletes that owner's oldest
  finished ones (record, metric points, log files), never another owner's (:func:`admit`);
* ``GET /v1/jobs`` pages are cut at ``max_job_list_bytes`` (4 MiB) (:func:`page`);
* a job running past ``max_job_wall_s`` (24 h) is cancelled by its runner, its error saying why.

The active and kept counts are taken under the runner's lock, so one server never admits past them (two
replicas admitting at the same instant may each add one).

Threat model: every token owner is untrusted. Without these one owner could fill the database and the
server's memory with configs, hold every job worker for ever, or delete what other owners keep.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, defer

import rockroll.envhub as envhub
from rockroll.api.db import JobRecord
from rockroll.api.db.models import JobMetricPoint
from rockroll.api.server.auth import Principal
from rockroll.api.server.caps import over_cap
from rockroll.api.server.errors import ApiError, capacity_error
from rockroll.client.job_state import TERMINAL_STATES, JobState

__all__ = ["JobCaps", "WallClock", "CAP_SETTINGS", "admit", "page", "eval_episodes", "json_bytes"]

#: the settings :class:`JobCaps` reads (each declared once, in ``Settings``)
CAP_SETTINGS = (
    "max_job_config_bytes", "max_active_jobs_per_owner", "max_kept_jobs_per_owner", "max_job_list_bytes",
    "max_job_total_steps", "max_job_episodes", "max_job_wall_s", "job_workers_per_owner",
)  # fmt: skip
ACTIVE = (JobState.QUEUED, JobState.RUNNING)
#: bytes of a job's view besides its config, metrics and error (ids, state, times), an upper bound
VIEW_OVERHEAD = 512


def json_bytes(value: Any) -> int:
    """Size of ``value`` as compact JSON (how the API sends it)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode())


@dataclass(frozen=True)
class JobCaps:
    """The server's job caps (``values``: setting name -> value) and single owners' own (``owners``)."""

    values: Mapping[str, float] = field(default_factory=dict)
    owners: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Any | None = None) -> JobCaps:
        """The caps of ``settings`` (None: the defaults ``Settings`` declares)."""
        if settings is None:
            from rockroll.api.server.settings import Settings

            return cls({name: Settings.model_fields[name].default for name in CAP_SETTINGS})
        return cls({name: getattr(settings, name) for name in CAP_SETTINGS}, dict(settings.job_owner_caps))

    def get(self, name: str, owner: str) -> float:
        """``owner``'s value of the cap ``name``."""
        mine = self.owners.get(owner, {})
        return mine[name] if name in mine else self.values[name]

    def setting(self, name: str, owner: str) -> str:
        """Where ``owner``'s value of ``name`` is set (named in refusals)."""
        if name in self.owners.get(owner, {}):
            return f"ROCKROLL_JOB_OWNER_CAPS[{owner!r}].{name}"
        return "ROCKROLL_" + name.upper()

    def workers_share(self, owner: str, workers: int) -> int:
        """How many of ``workers`` shared job workers ``owner``'s jobs may hold at once."""
        share = int(self.get("job_workers_per_owner", owner))
        return min(share, workers) if share > 0 else workers

    # ------------------------------------------------------------ checks
    def check_config(self, config: Any, owner: str) -> None:
        """413 ``too_large`` when the config's JSON is over ``max_job_config_bytes``."""
        cap = int(self.get("max_job_config_bytes", owner))
        size = json_bytes(config)
        if size > cap:
            setting = self.setting("max_job_config_bytes", owner)
            raise ApiError(
                413, "too_large",
                f"the job config is {size:,} bytes of JSON, over the cap of {cap:,} ({setting}); keep big data in "
                "files of your job directory and name them (config_path, paths in env kwargs)",
                {"field": "config", "size": size, "limit": cap, "setting": setting},
            )  # fmt: skip

    def check_work(self, kind: str, effective: Mapping[str, Any], owner: str) -> None:
        """422 ``over_cap`` when a train job's total steps or an eval job's episodes are over their cap."""
        name, key = ("max_job_total_steps", "total_steps") if kind == "train" else ("max_job_episodes", "episodes")
        asked = int(effective.get("total_steps") or 0) if kind == "train" else eval_episodes(effective)
        cap = int(self.get(name, owner))
        if asked > cap:
            raise over_cap(
                [{"field": key, "requested": asked, "cap": cap, "setting": self.setting(name, owner)}], owner
            )


def eval_episodes(config: Mapping[str, Any]) -> int:
    """Episodes an (effective) eval config plays: ``episodes``, or the sum over its ``envs``."""
    envs = config.get("envs")
    if not isinstance(envs, list):
        return int(config.get("episodes") or 0)
    total = 0
    for entry in envs:
        if not isinstance(entry, Mapping):
            continue
        seeds = entry.get("seeds")
        n = len(seeds) if isinstance(seeds, list) else int(entry.get("episodes") or 0)
        tag = entry.get("tag")
        total += n * (max(1, len(envhub.list_envs(tag))) if tag else 1)
    return total


def admit(s: Session, owner: str, caps: JobCaps) -> list[str]:
    """Make room for one more job of ``owner`` in session ``s``: the ids of its old jobs deleted.

    429 ``capacity`` when the owner has ``max_active_jobs_per_owner`` jobs queued or running, or keeps
    ``max_kept_jobs_per_owner`` jobs none of which has finished. Otherwise its oldest finished jobs
    beyond the kept cap go, with their metric points (the caller removes their log files).
    """
    mine = JobRecord.owner == owner
    active = s.scalar(select(func.count()).select_from(JobRecord).where(mine, JobRecord.state.in_(ACTIVE))) or 0
    limit = int(caps.get("max_active_jobs_per_owner", owner))
    if active >= limit:
        raise capacity_error(
            f"{owner} has {active} jobs queued or running, the limit ({caps.setting('max_active_jobs_per_owner', owner)}"
            f"={limit}); wait for one to finish or cancel one",
            active, limit, "active jobs per owner",
        )  # fmt: skip
    kept = int(caps.get("max_kept_jobs_per_owner", owner))
    held = s.scalar(select(func.count()).select_from(JobRecord).where(mine)) or 0
    if held < kept:
        return []
    finished = JobRecord.state.in_(tuple(TERMINAL_STATES))
    oldest = select(JobRecord.id).where(mine, finished).order_by(JobRecord.created_at, JobRecord.id)
    drop = list(s.scalars(oldest.limit(held - kept + 1)))
    if len(drop) < held - kept + 1:
        raise capacity_error(
            f"{owner} keeps {held} jobs, the limit ({caps.setting('max_kept_jobs_per_owner', owner)}={kept}), and "
            "too few have finished to make room; wait for one to finish",
            held, kept, "kept jobs per owner",
        )  # fmt: skip
    s.execute(delete(JobMetricPoint).where(JobMetricPoint.job_id.in_(drop)))
    s.execute(delete(JobRecord).where(JobRecord.id.in_(drop)))
    return drop


def page(s: Session, who: Principal, limit: int, offset: int, max_bytes: int) -> tuple[list[JobRecord], int | None]:
    """A ``GET /v1/jobs`` page, newest first, whose views fit ``max_bytes`` (at least one job), and the offset of
    the next page (None at the end). Sized from the stored JSON first, so no config past the page is loaded."""
    size = (
        func.coalesce(func.length(sa.cast(JobRecord.config, sa.Text)), 0)
        + func.coalesce(func.length(sa.cast(JobRecord.metrics, sa.Text)), 0)
        + func.coalesce(func.length(JobRecord.error), 0)
    )
    q = select(JobRecord.id, size).order_by(JobRecord.created_at.desc(), JobRecord.id.desc())
    if not who.admin:
        q = q.where(JobRecord.owner == who.owner)
    rows = s.execute(q.offset(offset).limit(limit + 1)).all()
    more = len(rows) > limit
    ids: list[str] = []
    used = 16  # {"jobs":[]}
    for job_id, n in rows[:limit]:
        n = int(n or 0) + VIEW_OVERHEAD
        if ids and used + n > max_bytes:
            more = True
            break
        ids.append(job_id)
        used += n
    found = {j.id: j for j in s.scalars(select(JobRecord).where(JobRecord.id.in_(ids)).options(defer(JobRecord.logs)))}
    return [found[i] for i in ids if i in found], (offset + len(ids) if more else None)


class WallClock:
    """When each running job started, and why those past their ``max_job_wall_s`` are cancelled."""

    def __init__(self, caps: JobCaps) -> None:
        self.caps = caps
        self._started: dict[str, tuple[str, float]] = {}  # job id -> (owner, monotonic start)
        self._late: dict[str, str] = {}  # job id -> why it is cancelled
        self._lock = threading.Lock()

    def start(self, job_id: str, owner: str) -> None:
        with self._lock:
            self._started[job_id] = (owner, time.monotonic())

    def overdue(self) -> list[str]:
        """The running jobs that just passed their cap (each named once; :meth:`end` says why)."""
        now, late = time.monotonic(), []
        with self._lock:
            for job_id, (owner, t0) in self._started.items():
                cap = self.caps.get("max_job_wall_s", owner)
                if job_id not in self._late and now - t0 > cap:
                    setting = self.caps.setting("max_job_wall_s", owner)
                    self._late[job_id] = (
                        f"the job ran past its wall-clock limit of {cap:g} s ({setting}) and was cancelled"
                    )
                    late.append(job_id)
        return late

    def end(self, job_id: str) -> str:
        """Forget a job that ended: why it was cancelled for its time ('' when it was not)."""
        with self._lock:
            self._started.pop(job_id, None)
            return self._late.pop(job_id, "")
