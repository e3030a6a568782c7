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
  ``random`` (or ``expert``) policy of :func:`rockroll.envs.play.play_episode` on one sandboxed session
  (the expert reads a replica of the session's env kept here in step through ``get_state``, see
  :class:`_Replica`: the sandboxed env's state is out of its reach);
* ``train``: :func:`rockroll.trainer.jobs.run_job` runs ``rockroll train``'s pipeline.

Job configs are the typed configs (``TrainJobConfig``, ``EvalConfig``, ``PolicyEvalConfig`` in
:mod:`rockroll.api.schemas`), validated by the one config loader when a job is submitted: a bad key
answers 400 ``invalid_job`` naming it (``details.key``, ``details.allowed``), never a failed job later.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import typing
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import select

import rockroll.envhub as envhub
from rockroll.agentrl.config_loader import ConfigError, parse_config
from rockroll.agentrl.eval import run_eval_job
from rockroll.api.auth import Principal
from rockroll.api.db import Database, JobRecord
from rockroll.api.errors import ApiError, RockrollError
from rockroll.api.job_state import TERMINAL_STATES, JobState
from rockroll.api.schemas import EvalJobConfig, JobKind, PolicyEvalConfig, is_model_eval
from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.play import play_episode
from rockroll.trainer.jobs import config_for_job, run_job

__all__ = ["JobContext", "JobRunner", "JOB_KINDS", "JobState", "TERMINAL_STATES", "Cancelled"]

log = logging.getLogger("rockroll.api")
JOB_KINDS: tuple[str, ...] = typing.get_args(JobKind)
MAX_LOG_CHARS = 200_000


class Cancelled(RockrollError):
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

    def open_session(self, env: str, kwargs: dict[str, Any]) -> TextEnvProtocol:
        """An env session in a sandbox (the API's placement)."""
        return self.runner.open_env(env, kwargs)


class JobRunner:
    """Queues and runs jobs on a small thread pool."""

    def __init__(
        self,
        db: Database,
        open_env: Callable[[str, dict[str, Any]], TextEnvProtocol],
        workers: int = 2,
        *,
        train: bool = True,
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
            for job in s.scalars(select(JobRecord).where(JobRecord.state.in_((JobState.QUEUED, JobState.RUNNING)))):
                if job.state == JobState.RUNNING:
                    job.state, job.error = JobState.FAILED, "the server restarted during the job"
                    job.finished_at = time.time()
        with self.db.session() as s:
            queued = [
                (j.id, dict(j.config)) for j in s.scalars(select(JobRecord).where(JobRecord.state == JobState.QUEUED))
            ]
        for job_id, config in queued:
            self._submit(job_id, config)

    # ----------------------------------------------------------- routes
    def create(self, who: Principal, kind: str, config: dict[str, Any]) -> JobRecord:
        """Record and queue a job."""
        if kind not in JOB_KINDS:
            raise ApiError(400, "invalid_job", f"kind must be one of {', '.join(JOB_KINDS)}")
        if kind == "train" and not self.train_enabled:
            raise ApiError(400, "invalid_job", "train jobs are disabled on this server (serve --train-jobs)")
        check_job_config(kind, config)
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
            if rec is not None and rec.state == JobState.QUEUED:
                rec.state, rec.finished_at = JobState.CANCELLED, time.time()
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
            if rec is None or rec.state != JobState.QUEUED:
                self._contexts.pop(ctx.job_id, None)
                return
            rec.state, rec.started_at = JobState.RUNNING, time.time()
            kind = rec.kind
        state, error, metrics = JobState.SUCCEEDED, "", None
        try:
            metrics = self.kinds[kind](ctx)
        except Cancelled:
            state = JobState.CANCELLED
            if self._closing:
                state, error = JobState.FAILED, "the server shut down during the job"
        except Exception as e:  # noqa: BLE001 - a job's failure is recorded, never raised
            state, error = JobState.FAILED, f"{type(e).__name__}: {e}"
            log.info("job %s failed: %s", ctx.job_id, error)
        if ctx.cancelled and state == JobState.SUCCEEDED:
            state = JobState.CANCELLED
        self._update(
            ctx.job_id,
            state=state,
            error=error,
            metrics=metrics,
            progress=1.0 if state == JobState.SUCCEEDED else None,
            log=f"job {state}" + (f": {error}" if error else ""),
        )
        self._contexts.pop(ctx.job_id, None)

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


def check_job_config(kind: str, config: Any) -> None:
    """Reject a job config that cannot run, before it is queued: 400 ``invalid_job`` naming the bad key.

    ``train``: :func:`rockroll.trainer.jobs.config_for_job` (its file, keys and overrides, merged and
    validated as a ``TrainConfig``); ``eval``: ``EvalJobConfig`` (a model eval or a built-in policy's).
    """
    try:
        if kind == "train":
            config_for_job(config)
        else:
            parse_config(EvalJobConfig, config)
    except ConfigError as e:
        details = {"key": e.key, "allowed": e.allowed, "problems": [{"key": k, "message": m} for k, m in e.problems]}
        raise ApiError(400, "invalid_job", f"invalid {kind} config: {e}", details) from e
    except FileNotFoundError as e:
        raise ApiError(400, "invalid_job", f"invalid {kind} config: {e}", {"key": "config_path"}) from e
    if kind == "eval" and isinstance(config, dict) and not is_model_eval(config) and config.get("policy") == "expert":
        _check_expert(str(config.get("env")))


def _check_expert(env_id: str) -> None:
    """400 ``invalid_job`` unless ``env_id`` is an env of this server's registry with an expert."""
    try:
        spec = envhub.spec(env_id)
    except envhub.UnknownEnvError as e:
        raise ApiError(
            400,
            "invalid_job",
            f"the expert policy plays registered envs only; {env_id!r} is not one (use policy random)",
            {"key": "policy"},
        ) from e
    if spec.expert is None:
        raise ApiError(400, "invalid_job", f"{env_id} has no expert policy (use policy random)", {"key": "policy"})


class _Replica:
    """A sandboxed session seen by an expert: calls go to the session; the expert reads a local
    replica of its env (same id and kwargs), set to the session's state after every reset and step.

    Experts read an env's private state (the map, the boxes), which a sandboxed env keeps to itself;
    ``get_state`` is its complete snapshot, so the replica is the session's env as it is now. The
    replica is never stepped: it runs none of the env's work (no tool, no shell), it only holds state.
    """

    def __init__(self, session: TextEnvProtocol, env_id: str, kwargs: dict[str, Any]) -> None:
        self.session = session
        self.replica = envhub.make(env_id, **kwargs)

    def _sync(self) -> None:
        self.replica.set_state(self.session.get_state())

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = self.session.reset(seed=seed, options=options)
        self.replica.reset(seed=seed, options=options)
        self._sync()
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        out = self.session.step(action)
        self._sync()
        return out

    def action_candidates(self) -> list[str]:
        return self.session.action_candidates()

    def close(self) -> None:
        self.replica.close()

    def __getattr__(self, name: str) -> Any:  # what the expert reads: the replica's env (spec, unwrapped, ...)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.replica, name)


def run_eval(ctx: JobContext) -> dict[str, Any]:
    """Play ``episodes`` episodes with a simple policy in a sandbox; metrics under ``eval/<env>/``."""
    if is_model_eval(ctx.config):
        return run_eval_job(ctx)
    cfg = parse_config(PolicyEvalConfig, ctx.config)
    env_id, episodes, policy, seed0 = cfg.env, cfg.episodes, cfg.policy, cfg.seed
    if policy == "expert":
        _check_expert(env_id)
    session = ctx.open_session(env_id, dict(cfg.kwargs))
    ctx.log(f"eval {env_id} with the {policy} policy, {episodes} episodes, on sandbox {session.sandbox_id}")
    player: Any = session
    wins = steps = 0
    total = 0.0
    try:
        if policy == "expert":
            player = _Replica(session, env_id, dict(cfg.kwargs))
        for i in range(episodes):
            ctx.check()
            res = play_episode(player, policy, seed0 + i)
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
        if player is not session:
            player.close()
        session.close()
    return metrics


def run_train(ctx: JobContext) -> dict[str, Any]:
    """Hand the job to :func:`rockroll.trainer.jobs.run_job` (the same pipeline as ``rockroll train``)."""
    return run_job(ctx.config, ctx) or {}
