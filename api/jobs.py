"""Jobs: ``train`` and ``eval`` runs with a persisted lifecycle, progress, metrics and logs.

States: ``queued`` -> ``running`` -> ``succeeded`` | ``failed`` | ``cancelled``. A job runs in a
worker thread with a :class:`JobContext` through which it logs, reports progress and metrics,
and sees cancellation (cooperative: checked between steps). Everything is written to ``api_jobs``.
On server start, jobs left ``running`` by a dead server are marked failed and ``queued`` ones are
queued again.

What a job runs:

* ``eval`` (built in): with a model-eval config (``engine``/``envs`` keys, the YAML of
  ``rockroll eval``), :func:`rockroll.agentrl.eval.run_eval_job` runs that engine on the envs, every
  session placed in a pooled sandbox; with ``{"env", "episodes", "policy"}`` it plays the
  ``random`` (or ``expert``) policy of :func:`rockroll.envs.play.play_episode` on one sandboxed session;
* ``train``: delegated to ``trainer.jobs:run_job(config, ctx)`` (the trainer issue provides it);
  without it the job fails with a message saying so.
"""

from __future__ import annotations

import importlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import select

from rockroll.api.auth import Principal
from rockroll.api.db import Database, JobRecord
from rockroll.api.errors import ApiError

__all__ = ["JobContext", "JobRunner", "JOB_KINDS", "TERMINAL_STATES", "Cancelled"]

log = logging.getLogger("rockroll.api")
JOB_KINDS = ("train", "eval")
TERMINAL_STATES = ("succeeded", "failed", "cancelled")
MAX_LOG_CHARS = 200_000


class Cancelled(Exception):
    """Raised inside a job when it was cancelled."""


class JobContext:
    """What a running job sees: its config, and calls to log, report and check cancellation."""

    def __init__(self, runner: JobRunner, job_id: str, config: dict[str, Any]) -> None:
        self.runner = runner
        self.job_id = job_id
        self.config = config
        self._flag = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._flag.is_set()

    def check(self) -> None:
        """Raise :class:`Cancelled` when the job was cancelled."""
        if self._flag.is_set():
            raise Cancelled()

    def log(self, line: str) -> None:
        self.runner._update(self.job_id, log=line)

    def report(self, *, progress: float | None = None, metrics: dict[str, Any] | None = None) -> None:
        self.runner._update(self.job_id, progress=progress, metrics=metrics)

    def open_session(self, env: str, kwargs: dict[str, Any]) -> Any:
        """An env session in a sandbox (the API's placement)."""
        return self.runner.open_env(env, kwargs)


class JobRunner:
    """Queues and runs jobs on a small thread pool."""

    def __init__(
        self, db: Database, open_env: Callable[[str, dict[str, Any]], Any], workers: int = 2, *, train: bool = True
    ) -> None:
        self.db = db
        self.open_env = open_env
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="job")
        self._contexts: dict[str, JobContext] = {}
        self._lock = threading.Lock()
        self._closing = False
        self.train_enabled = train
        self.kinds: dict[str, Callable[[JobContext], dict[str, Any]]] = {"eval": run_eval, "train": run_train}

    def recover(self) -> None:
        """After a restart: fail jobs that were running, queue the queued ones again."""
        with self.db.session() as s:
            for job in s.scalars(select(JobRecord).where(JobRecord.state.in_(("queued", "running")))):
                if job.state == "running":
                    job.state, job.error, job.finished_at = "failed", "the server restarted during the job", time.time()
        with self.db.session() as s:
            queued = [(j.id, dict(j.config)) for j in s.scalars(select(JobRecord).where(JobRecord.state == "queued"))]
        for job_id, config in queued:
            self._submit(job_id, config)

    # ----------------------------------------------------------- routes
    def create(self, who: Principal, kind: str, config: dict[str, Any]) -> JobRecord:
        """Record and queue a job."""
        if kind not in JOB_KINDS:
            raise ApiError(400, "invalid_job", f"kind must be one of {', '.join(JOB_KINDS)}")
        if kind == "eval":
            check_eval_config(config)
        if kind == "train" and not self.train_enabled:
            raise ApiError(400, "invalid_job", "train jobs are disabled on this server (serve --train-jobs)")
        job = JobRecord(
            id=f"job-{secrets.token_hex(8)}",
            owner=who.owner,
            kind=kind,
            config=config,
            state="queued",
            progress=0.0,
            metrics={},
            logs="",
            error="",
            created_at=time.time(),
        )
        with self.db.session() as s:
            s.add(job)
        self._submit(job.id, config)
        return job

    def get(self, job_id: str, who: Principal) -> JobRecord:
        """A job visible to ``who`` (404 otherwise)."""
        with self.db.session() as s:
            job = s.get(JobRecord, job_id)
        if job is None or not who.can_see(job.owner):
            raise ApiError(404, "job_not_found", f"no job {job_id!r}")
        return job

    def list(self, who: Principal, limit: int = 100) -> list[JobRecord]:
        """Recent jobs visible to ``who``."""
        q = select(JobRecord).order_by(JobRecord.created_at.desc()).limit(limit)
        if not who.admin:
            q = q.where(JobRecord.owner == who.owner)
        with self.db.session() as s:
            return list(s.scalars(q))

    def cancel(self, job_id: str, who: Principal) -> JobRecord:
        """Cancel a job (409 when it already finished)."""
        job = self.get(job_id, who)
        if job.state in TERMINAL_STATES:
            raise ApiError(409, "job_finished", f"job {job_id} already {job.state}")
        ctx = self._contexts.get(job_id)
        if ctx is not None:
            ctx._flag.set()
        with self.db.session() as s:
            rec = s.get(JobRecord, job_id)
            if rec is not None and rec.state == "queued":
                rec.state, rec.finished_at = "cancelled", time.time()
        return self.get(job_id, who)

    def close(self) -> None:
        """Stop: running jobs end as failed ("the server shut down"), queued ones stay queued."""
        self._closing = True
        for ctx in list(self._contexts.values()):
            ctx._flag.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

    # ---------------------------------------------------------- running
    def _submit(self, job_id: str, config: dict[str, Any]) -> None:
        ctx = JobContext(self, job_id, config)
        with self._lock:
            self._contexts[job_id] = ctx
        self._pool.submit(self._run, ctx)

    def _run(self, ctx: JobContext) -> None:
        if self._closing:  # leave it queued: the next server start runs it
            return
        with self.db.session() as s:
            rec = s.get(JobRecord, ctx.job_id)
            if rec is None or rec.state != "queued":
                self._contexts.pop(ctx.job_id, None)
                return
            rec.state, rec.started_at = "running", time.time()
            kind = rec.kind
        state, error, metrics = "succeeded", "", None
        try:
            metrics = self.kinds[kind](ctx)
        except Cancelled:
            state = "cancelled"
            if self._closing:
                state, error = "failed", "the server shut down during the job"
        except Exception as e:  # noqa: BLE001 - a job's failure is recorded, never raised
            state, error = "failed", f"{type(e).__name__}: {e}"
            log.info("job %s failed: %s", ctx.job_id, error)
        if ctx.cancelled and state == "succeeded":
            state = "cancelled"
        self._update(
            ctx.job_id,
            state=state,
            error=error,
            metrics=metrics,
            progress=1.0 if state == "succeeded" else None,
            log=f"job {state}" + (f": {error}" if error else ""),
        )
        self._contexts.pop(ctx.job_id, None)

    def _update(
        self,
        job_id: str,
        *,
        state: str | None = None,
        error: str | None = None,
        log: str | None = None,
        progress: float | None = None,
        metrics: dict[str, Any] | None = None,
    ) -> None:
        with self.db.session() as s:
            rec = s.get(JobRecord, job_id)
            if rec is None:
                return
            if state is not None:
                rec.state, rec.finished_at = state, time.time()
            if error:
                rec.error = error
            if progress is not None:
                rec.progress = max(0.0, min(1.0, float(progress)))
            if metrics is not None:
                rec.metrics = {**(rec.metrics or {}), **metrics}
            if log is not None:
                stamp = time.strftime("%H:%M:%S", time.gmtime())
                rec.logs = ((rec.logs or "") + f"{stamp} {log}\n")[-MAX_LOG_CHARS:]


def _is_model_eval(config: dict[str, Any]) -> bool:
    return "engine" in config or "envs" in config


def check_eval_config(config: dict[str, Any]) -> None:
    """Reject an eval config that cannot run, before it is queued."""
    if _is_model_eval(config):
        from rockroll.agentrl.eval_config import EvalConfig, from_dict

        try:
            from_dict(EvalConfig, config)
        except (ValueError, TypeError) as e:
            raise ApiError(400, "invalid_job", f"invalid eval config: {e}") from e
        return
    if not isinstance(config.get("env", ""), str) or not config.get("env"):
        raise ApiError(400, "invalid_job", "eval config needs 'env', e.g. {'env': 'FrozenLake-v0'}")
    episodes = config.get("episodes", 10)
    if isinstance(episodes, bool) or not isinstance(episodes, int) or not 1 <= episodes <= 100_000:
        raise ApiError(400, "invalid_job", "'episodes' must be an int in 1..100000")
    if config.get("policy", "random") not in ("random", "expert"):
        raise ApiError(400, "invalid_job", "'policy' must be 'random' or 'expert'")
    if not isinstance(config.get("kwargs", {}), dict):
        raise ApiError(400, "invalid_job", "'kwargs' must be an object")
    seed = config.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ApiError(400, "invalid_job", "'seed' must be a non-negative int")


def run_eval(ctx: JobContext) -> dict[str, Any]:
    """Play ``episodes`` episodes with a simple policy in a sandbox; metrics under ``eval/<env>/``."""
    from rockroll.envs.play import play_episode

    cfg = ctx.config
    if _is_model_eval(cfg):
        from rockroll.agentrl.eval import run_eval_job

        return run_eval_job(ctx)
    env_id, episodes = cfg["env"], int(cfg.get("episodes", 10))
    policy, seed0 = cfg.get("policy", "random"), int(cfg.get("seed", 0))
    session = ctx.open_session(env_id, dict(cfg.get("kwargs", {})))
    ctx.log(f"eval {env_id} with the {policy} policy, {episodes} episodes, on sandbox {session.sandbox_id}")
    wins = steps = 0
    total = 0.0
    try:
        for i in range(episodes):
            ctx.check()
            res = play_episode(session, policy, seed0 + i)
            wins, steps, total = wins + res.success, steps + res.steps, total + res.total_reward
            metrics = {
                f"eval/{env_id}/success": wins / (i + 1),
                f"eval/{env_id}/return": total / (i + 1),
                f"eval/{env_id}/steps": steps / (i + 1),
                "episodes": i + 1,
            }
            ctx.report(progress=(i + 1) / episodes, metrics=metrics)
            ctx.log(
                f"episode {i}: seed={seed0 + i} steps={res.steps} return={res.total_reward:+.2f} success={res.success}"
            )
    finally:
        session.close()
    return metrics


def run_train(ctx: JobContext) -> dict[str, Any]:
    """Hand the job to ``trainer.jobs:run_job`` (provided by the trainer)."""
    try:
        module = importlib.import_module("rockroll.trainer.jobs")
    except ImportError as e:
        raise RuntimeError("train jobs need trainer.jobs:run_job(config, ctx), which is not installed") from e
    return module.run_job(ctx.config, ctx) or {}
