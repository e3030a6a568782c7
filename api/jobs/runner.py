"""Jobs: ``train`` and ``eval`` runs with a persisted lifecycle, progress, metrics and logs.

States: ``queued`` -> ``running`` -> ``succeeded`` | ``failed`` | ``cancelled``. The control plane
never runs a job's work itself: :class:`JobRunner` keeps ``workers`` threads, each serving one job's
worker process (:mod:`rockroll.api.jobs.process`), which runs the job kind
(:mod:`rockroll.api.jobs.kinds`) with the *effective* config (:mod:`rockroll.api.jobs.configs`: every
path inside the owner's job directory, every URL allowed). Its log lines go to rotated files
(:mod:`rockroll.api.jobs.logs`), its reports and end to the ``api_jobs`` record. Cancellation is
cooperative (checked between steps) with a kill after a grace period. On server start, jobs left
``running`` by a dead server are marked failed and ``queued`` ones are queued again.

Control-plane replicas on one database share the jobs: each job records its *runner* (the lease tag
of the server running it, :attr:`rockroll.sandbox.lease.Lease.tag`). A replica takes over only the
jobs whose runner no longer holds its lease (at start, and every :data:`TAKEOVER_S`): running ones
are marked failed, queued ones run here. A cancel asked at another replica than the runner is
recorded (``cancel_requested``); the runner looks for such requests every :data:`CANCEL_POLL_S`
while it runs jobs.

Job configs are the typed configs (``TrainJobConfig``, ``EvalConfig``, ``PolicyEvalConfig`` in
:mod:`rockroll.api.server.schemas`), checked when a job is submitted: a bad key answers 400 ``invalid_job``
naming it (``details.key``, ``details.allowed``), a path leaving the owner's job directory 422
``job_path``, a URL off the allowlist 422 ``job_url``; never a failed job later.

The database stays small (issue 13 item 10): a record keeps the tail of its log (written when the
job ends and at most every :data:`LOG_FLUSH_S`), its latest progress and metrics (at most 256 names,
written at most every :data:`REPORT_FLUSH_S`: reports between are merged), and SQLite's WAL is
checkpointed after every job and every :data:`CHECKPOINT_S`.

Per owner (issue 48 items 3, 4): caps on configs, active and kept jobs, steps, episodes and run time
(:mod:`rockroll.api.jobs.caps`); fair shares of the workers (:mod:`rockroll.api.jobs.fair`).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import defer

from rockroll.api.db import Database, JobRecord
from rockroll.api.jobs.caps import JobCaps, WallClock, admit, page
from rockroll.api.jobs.configs import effective_config
from rockroll.api.jobs.fair import FairPool
from rockroll.api.jobs.identity import WorkerIdentity, find_worker_identity
from rockroll.api.jobs.logs import JobLogs
from rockroll.api.jobs.outbound import key_env_values
from rockroll.api.jobs.paths import JobDirs
from rockroll.api.jobs.process import JobProcess
from rockroll.api.jobs.protocol import Cancelled, clean_metrics
from rockroll.api.jobs.recovery import orphaned_jobs
from rockroll.api.jobs.sandboxes import JobConfinement, SandboxSource
from rockroll.api.server.auth import Principal
from rockroll.api.server.errors import ApiError
from rockroll.api.server.schemas import JobKind
from rockroll.client.job_state import TERMINAL_STATES, JobState

__all__ = ["JobRunner", "JOB_KINDS", "JobState", "TERMINAL_STATES", "Cancelled"]

log = logging.getLogger("rockroll.api")
JOB_KINDS: tuple[str, ...] = typing.get_args(JobKind)
#: seconds between writes of a running job's log tail to its record, and of its progress and metrics
LOG_FLUSH_S, REPORT_FLUSH_S = 5.0, 1.0
#: seconds between WAL checkpoints
CHECKPOINT_S = 60.0
#: seconds between looks for jobs of replicas that died, and for cancels asked at other replicas
TAKEOVER_S, CANCEL_POLL_S = 15.0, 1.0


class JobRunner:
    """Queues jobs and runs each in a worker process, on ``workers`` (plus reserve) workers shared fairly by owners."""

    def __init__(
        self,
        db: Database,
        open_env: Callable[..., Any],
        workers: int = 2,
        *,
        dirs: JobDirs,
        train: bool = True,
        engine_urls: tuple[str, ...] = (),
        user: str = "",
        log_max_bytes: int = 1_000_000,
        runner: str = "",
        resolve_env: Callable[[str, str], Any] | None = None,
        confinement: JobConfinement | None = None,
        caps: JobCaps | None = None,
        reserve_workers: int = 1,
        key_envs: tuple[str, ...] = (),
    ) -> None:
        self.db = db
        self.confinement = confinement  # the jobs' sandboxes and the isolation their workers need (None: no rule)
        self.runner = runner  # this server's lease tag, recorded on the jobs it runs
        self.open_env = open_env
        self.resolve_env = resolve_env  # (env id, owner) -> the id the owner may play (UnknownEnvError otherwise)
        self.dirs = dirs
        self.engine_urls = tuple(engine_urls)
        self.key_envs = tuple(key_envs)  # variables a job may name as its api_key_env (the server's values passed on)
        self.user = user
        self.logs = JobLogs(dirs.logs, log_max_bytes)
        self.train_enabled = train
        self.caps = caps or JobCaps.from_settings()
        self.wall = WallClock(self.caps)  # cancels a job past its max_job_wall_s
        self._pool = FairPool(self._run, workers, reserve_workers, share=self.caps.workers_share)
        self._admit = threading.Lock()  # an owner's caps are counted and its job added as one step
        self._procs: dict[str, JobProcess] = {}
        self._cancel: set[str] = set()
        self._flushed: dict[str, float] = {}  # when each running job's log tail was last written
        self._reported: dict[str, float] = {}  # ... and its progress and metrics
        self._pending: dict[str, dict[str, Any]] = {}  # reports not written yet
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._identity: WorkerIdentity | None | bool = False  # False: not looked up yet
        self.worker_note = ""  # how job workers run (or why they are not confined), once looked up
        threading.Thread(target=self._maintain, name="job-maintenance", daemon=True).start()
        threading.Thread(target=self._poll_cancels, name="job-cancels", daemon=True).start()

    @classmethod
    def from_settings(
        cls, db: Database, open_env: Callable[..., Any], settings: Any, runner: str = "",
        resolve_env: Callable[[str, str], Any] | None = None, sandboxes: SandboxSource | None = None,
    ) -> JobRunner:  # fmt: skip
        """The runner of a server's ``Settings`` (``runner``: its lease tag; ``resolve_env(env_id, owner)``: the
        catalog's lookup, so train jobs may play their owner's custom envs)."""
        dirs = JobDirs(settings.job_root(), tuple(Path(d) for d in settings.job_model_dirs))
        return cls(
            db, open_env, settings.job_workers, dirs=dirs, train=settings.train_jobs,
            engine_urls=tuple(settings.job_engine_urls), user=settings.job_user,
            log_max_bytes=settings.job_log_max_bytes, runner=runner, resolve_env=resolve_env,
            confinement=JobConfinement(sandboxes, settings, settings.min_isolation),
            caps=JobCaps.from_settings(settings), reserve_workers=settings.job_reserve_workers,
            key_envs=tuple(settings.job_api_key_envs),
        )  # fmt: skip

    def recover(self) -> list[str]:
        """Take over the jobs of servers that are gone (:func:`rockroll.api.jobs.recovery.orphaned_jobs`): fail
        those that were running, run the queued ones here. Returns the ids queued."""
        queued = orphaned_jobs(self.db, self.runner)
        for job_id, owner in queued:
            self._pool.submit(job_id, owner)
        return [job_id for job_id, _ in queued]

    # ----------------------------------------------------------- routes
    def create(self, who: Principal, kind: str, config: dict[str, Any]) -> JobRecord:
        """Check, record and queue a job (400/422 when its config cannot run, see the module docstring)."""
        if kind not in JOB_KINDS:
            raise ApiError(400, "invalid_job", f"kind must be one of {', '.join(JOB_KINDS)}")
        if kind == "train" and not self.train_enabled:
            raise ApiError(400, "invalid_job", "train jobs are disabled on this server (serve --train-jobs)")
        self.caps.check_config(config, who.owner)
        self.caps.check_work(kind, self.effective(kind, config, who.owner), who.owner)
        job = JobRecord(
            id=f"job-{secrets.token_hex(8)}",
            owner=who.owner,
            kind=kind,
            config=config,
            state=JobState.QUEUED,
            progress=0.0,
            metrics={},
            logs="",
            error="",
            created_at=time.time(),
            runner=self.runner,
        )
        with self._admit, self.db.session() as s:
            dropped = admit(s, who.owner, self.caps)  # 429 over the active cap; the owner's oldest finished go
            s.add(job)
        for old in dropped:
            self.logs.remove(old)
        self._pool.submit(job.id, who.owner)
        return job

    def effective(self, kind: str, config: Any, owner: str) -> dict[str, Any]:
        """The config ``owner``'s worker runs (:func:`rockroll.api.jobs.configs.effective_config`)."""
        owner_dir = self.dirs.ensure(owner)
        resolve = self.resolve_env
        return effective_config(
            kind, config, dirs=self.dirs, owner_dir=owner_dir, engine_urls=self.engine_urls,
            resolve_env=None if resolve is None else (lambda env_id: resolve(env_id, owner)), key_envs=self.key_envs,
        )  # fmt: skip

    def get(self, job_id: str, who: Principal) -> JobRecord:
        """A job visible to ``who`` (404 otherwise)."""
        with self.db.session() as s:
            job = s.get(JobRecord, job_id)
        if job is None or not who.can_see(job.owner):
            raise ApiError(404, "job_not_found", f"no job {job_id!r}")
        return job

    def page(self, who: Principal, limit: int = 100, offset: int = 0) -> tuple[list[JobRecord], int | None]:
        """:meth:`list`'s jobs within ``max_job_list_bytes`` (:func:`~rockroll.api.jobs.caps.page`), the next offset."""
        with self.db.session() as s:
            return page(s, who, limit, offset, int(self.caps.get("max_job_list_bytes", who.owner)))

    def list(self, who: Principal, limit: int = 100, offset: int = 0) -> list[JobRecord]:
        """Jobs visible to ``who``, newest first (``offset`` of them skipped)."""
        q = select(JobRecord).order_by(JobRecord.created_at.desc(), JobRecord.id.desc()).offset(offset).limit(limit)
        if not who.admin:
            q = q.where(JobRecord.owner == who.owner)
        with self.db.session() as s:
            return list(s.scalars(q.options(defer(JobRecord.logs))))

    def read_logs(self, job_id: str, who: Principal, tail: int | None = None) -> str:
        """A job's log: the end of its file (the last ``tail`` lines), else the tail its record keeps."""
        job = self.get(job_id, who)
        text = self.logs.read(job_id, tail_lines=tail)
        if text is None:
            text = job.logs or ""
            if tail is not None:
                text = "".join(text.splitlines(keepends=True)[-tail:]) if tail > 0 else ""
        return text

    def cancel(self, job_id: str, who: Principal) -> JobRecord:
        """Cancel a job (409 when it already finished)."""
        job = self.get(job_id, who)
        if job.state in TERMINAL_STATES:
            raise ApiError(409, "job_finished", f"job {job_id} already {job.state}")
        with self._lock:
            self._cancel.add(job_id)
            proc = self._procs.get(job_id)
        if proc is not None:
            proc.cancel()
        self._pool.discard(job_id)
        with self.db.session() as s:
            rec = s.get(JobRecord, job_id)
            if rec is not None and rec.state == JobState.QUEUED:
                rec.state, rec.finished_at = JobState.CANCELLED, time.time()
            elif rec is not None and proc is None:  # run by another replica: it looks for the request
                rec.cancel_requested = True
        return self.get(job_id, who)

    def close(self) -> None:
        """Stop: running jobs end as failed ("the server shut down"), queued ones stay queued."""
        self._closing.set()
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            proc.cancel(grace_s=10.0)
        self._pool.shutdown()
        self._checkpoint()

    # ---------------------------------------------------------- running
    def _run(self, job_id: str) -> None:
        if self._closing.is_set():  # leave it queued: the next server start runs it
            return
        with self.db.session() as s:
            rec = s.get(JobRecord, job_id)
            if rec is None or rec.state != JobState.QUEUED or rec.runner not in ("", self.runner):
                return
            rec.state, rec.started_at, rec.runner = JobState.RUNNING, time.time(), self.runner
            kind, owner, config = rec.kind, rec.owner, dict(rec.config or {})
        try:
            state, error, metrics = self._work(job_id, kind, owner, config)
        except Exception as e:  # noqa: BLE001 - a job's failure is recorded, never raised
            state, error, metrics = JobState.FAILED, f"{type(e).__name__}: {e}", None
        late = self.wall.end(job_id)
        if late and state != JobState.SUCCEEDED:
            state, error = JobState.CANCELLED, late
        if self._closing.is_set() and state == JobState.CANCELLED:
            state, error = JobState.FAILED, "the server shut down during the job"
        if error:
            log.info("job %s failed: %s", job_id, error)
        self._update(
            job_id,
            state=state,
            error=error,
            metrics=metrics,
            progress=1.0 if state == JobState.SUCCEEDED else None,
            log=f"job {state}" + (f": {error}" if error else ""),
        )
        with self._lock:
            self._cancel.discard(job_id)
            for seen in (self._flushed, self._reported, self._pending):
                seen.pop(job_id, None)
        self._checkpoint()

    def _work(self, job_id: str, kind: str, owner: str, config: dict[str, Any]) -> tuple[JobState, str, Any]:
        try:
            effective = self.effective(kind, config, owner)
        except ApiError as e:
            return JobState.FAILED, e.message, None
        owner_dir = self.dirs.owner_dir(owner)
        identity = self._worker_identity()
        if identity is not None:
            os.chown(owner_dir, identity.uid, identity.gid)
        rule = self.confinement
        problem = rule.worker_problem(identity is not None and identity.confined, self.user) if rule else ""
        if problem:  # the confinement rule: no job runs in a worker weaker than the server's minimum
            return JobState.FAILED, f"{problem} ({self.worker_note})", None
        if identity is None or not identity.confined:  # the fallback is said in every job's log
            self._update(job_id, log=f"warning: {self.worker_note}")

        def open_env(env: str, kwargs: dict[str, Any]) -> Any:  # the job's sessions live in its owner's sandboxes
            return self.open_env(env, kwargs, owner=owner)

        proc = JobProcess(
            job_id, kind, effective, cwd=owner_dir, logs=self.logs, open_env=open_env, identity=identity,
            on_log=lambda line: self._update(job_id, log=line),
            on_report=lambda progress, metrics: self._update(job_id, progress=progress, metrics=metrics),
            sandboxes=rule.for_job(owner) if rule else None, min_isolation=rule.passed_on() if rule else "",
            keys=key_env_values(effective, self.key_envs),
        )  # fmt: skip
        with self._lock:
            self._procs[job_id] = proc
            self.wall.start(job_id, owner)
            if job_id in self._cancel or self._closing.is_set():
                proc.cancel()
        try:
            return proc.run()
        finally:
            with self._lock:
                self._procs.pop(job_id, None)

    def _worker_identity(self) -> WorkerIdentity | None:
        with self._lock:
            if self._identity is False:
                self._identity, self.worker_note = find_worker_identity(
                    self.user, self.dirs.root, readable=self.dirs.model_dirs
                )
            found = self._identity
            return None if isinstance(found, bool) else found

    def _update(
        self,
        job_id: str,
        *,
        state: JobState | None = None,
        error: str | None = None,
        log: str | None = None,
        progress: float | None = None,
        metrics: dict[str, Any] | None = None,
    ) -> None:
        if log is not None:
            self.logs.append(job_id, log)
        now = time.monotonic()
        with self._lock:  # reports between two writes are merged: a job writes its record at most every second
            pending = self._pending.setdefault(job_id, {})
            if progress is not None:
                pending["progress"] = max(0.0, min(1.0, float(progress)))
            if metrics:
                pending["metrics"] = clean_metrics({**pending.get("metrics", {}), **metrics})
            final = state is not None or bool(error)
            write_logs = final or now - self._flushed.get(job_id, 0.0) >= LOG_FLUSH_S
            write_report = final or (bool(pending) and now - self._reported.get(job_id, 0.0) >= REPORT_FLUSH_S)
            if not (write_logs or write_report):
                return
            report = self._pending.pop(job_id, {}) if write_report else {}
            if write_logs:
                self._flushed[job_id] = now
            if write_report:
                self._reported[job_id] = now
        with self.db.session() as s:
            rec = s.get(JobRecord, job_id)
            if rec is None:
                return
            if state is not None:
                rec.state, rec.finished_at = state, time.time()
            if error:
                rec.error = error[:4000]
            if "progress" in report:
                rec.progress = report["progress"]
            if report.get("metrics"):
                rec.metrics = clean_metrics({**(rec.metrics or {}), **report["metrics"]})
            if write_logs:
                rec.logs = self.logs.tail(job_id)

    def _maintain(self) -> None:
        last_checkpoint = time.monotonic()
        while not self._closing.wait(TAKEOVER_S):
            try:
                self.recover()
            except Exception as e:  # noqa: BLE001 - a database hiccup: next time
                log.warning("cannot look for jobs of stopped servers: %s", e)
            if time.monotonic() - last_checkpoint >= CHECKPOINT_S:
                last_checkpoint = time.monotonic()
                self._checkpoint()

    def _poll_cancels(self) -> None:
        """Cancel the running jobs past their wall-clock cap, and those whose cancel was asked at another replica."""
        while not self._closing.wait(CANCEL_POLL_S):
            with self._lock:
                running = list(self._procs)
            if not running:
                continue
            asked = self.wall.overdue()  # past their wall-clock cap
            try:
                with self.db.session() as s:
                    asked += s.scalars(
                        select(JobRecord.id).where(JobRecord.id.in_(running), JobRecord.cancel_requested)
                    )
            except Exception as e:  # noqa: BLE001 - a database hiccup: next time
                log.debug("cannot look for cancel requests: %s", e)
            for job_id in asked:
                with self._lock:
                    self._cancel.add(job_id)
                    proc = self._procs.get(job_id)
                if proc is not None:
                    proc.cancel()

    def _checkpoint(self) -> None:
        try:
            self.db.checkpoint()
        except Exception as e:  # noqa: BLE001 - a busy database is checkpointed next time
            log.debug("WAL checkpoint failed: %s", e)
