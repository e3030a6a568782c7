"""Job routes: create, list, show, logs, cancel (per owner)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import PlainTextResponse

from rockroll.api.db import JobRecord
from rockroll.api.jobs.caps import json_bytes
from rockroll.api.server.deps import StateDep, Who
from rockroll.api.server.schemas import JobCreate, is_model_eval
from rockroll.client.responses import JobInfo, JobList, JobMetrics

__all__ = ["router", "job_view"]

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def job_view(job: JobRecord) -> dict[str, Any]:
    """The JSON view of a job (logs are served apart)."""
    return {
        "id": job.id,
        "owner": job.owner,
        "kind": job.kind,
        "config": job.config,
        "state": job.state,
        "progress": job.progress,
        "metrics": job.metrics,
        "error": job.error,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }


def _named_envs(kind: str, config: Any) -> list[str]:
    """The env ids an eval job's config names (``env``, or each ``envs`` entry's ``env``)."""
    if kind != "eval" or not isinstance(config, dict):
        return []
    if not is_model_eval(config):
        return [config["env"]] if isinstance(config.get("env"), str) else []
    envs = config.get("envs")
    return (
        [e["env"] for e in envs if isinstance(e, dict) and isinstance(e.get("env"), str) and e["env"]]
        if isinstance(envs, list)
        else []
    )


@router.post("", status_code=201, response_model=JobInfo)
def create_job(body: JobCreate, state: StateDep, who: Who) -> dict:
    """Queue a ``train`` or ``eval`` job owned by the caller.

    Every env an eval job names must be one the caller may open: another owner's private env is
    unknown here (404 ``env_not_found``), as it is to the session routes.
    """
    for env_id in _named_envs(body.kind, body.config):
        state.catalog.resolve(env_id, who)
    return job_view(state.jobs.create(who, body.kind, body.config))


@router.get("", response_model=JobList)
def list_jobs(
    state: StateDep,
    who: Who,
    response: Response,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> dict[str, Any]:
    """The caller's jobs, newest first, ``limit`` from ``offset`` on (every owner's for admins).

    A page is at most ``max_job_list_bytes`` (4 MiB; at least one job): when more jobs follow, the
    ``X-Next-Offset`` header holds the next page's ``offset`` and ``Link`` its URL (``rel="next"``).
    """
    jobs, after = state.jobs.page(who, limit, offset)
    views, used, cap = [], 16, state.settings.max_job_list_bytes
    for job in jobs:  # the page was sized from the stored JSON; the views themselves decide
        view = job_view(job)
        used += json_bytes(view) + 1
        if views and used > cap:
            after = offset + len(views)
            break
        views.append(view)
    if after is not None:
        response.headers["X-Next-Offset"] = str(after)
        response.headers["Link"] = f'</v1/jobs?limit={limit}&offset={after}>; rel="next"'
    return {"jobs": views}


@router.get("/{job_id}", response_model=JobInfo)
def show_job(job_id: str, state: StateDep, who: Who) -> dict:
    """A job: state, progress and latest metrics."""
    return job_view(state.jobs.get(job_id, who))


@router.get("/{job_id}/metrics", response_model=JobMetrics)
def job_metric_history(job_id: str, state: StateDep, who: Who) -> dict[str, Any]:
    """Every numeric metrics report of the job, oldest first (kept in the database: it outlives a restart)."""
    job = state.jobs.get(job_id, who)
    return {"job_id": job.id, "points": state.metric_history.get(job.id)}


@router.get("/{job_id}/logs", response_class=PlainTextResponse)
def job_logs(
    job_id: str, state: StateDep, who: Who, tail: Annotated[int | None, Query(ge=0, le=100_000)] = None
) -> str:
    """A job's log lines (plain text): the end of its current log file (at most 200 kB), or its last ``tail`` lines."""
    return state.jobs.read_logs(job_id, who, tail)


@router.post("/{job_id}/cancel", response_model=JobInfo)
def cancel_job(job_id: str, state: StateDep, who: Who) -> dict:
    """Cancel a queued or running job (cooperative: a running job stops at its next check)."""
    return job_view(state.jobs.cancel(job_id, who))
