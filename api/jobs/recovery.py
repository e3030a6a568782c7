"""Jobs a server takes over when it starts: those of runners (servers, replicas) that are gone."""

from __future__ import annotations

import logging
import time

from sqlalchemy import select

from rockroll.api.db import Database, JobRecord
from rockroll.client.job_state import JobState
from rockroll.sandbox.lease import tag_live

__all__ = ["orphaned_jobs"]

log = logging.getLogger("rockroll.api")


def orphaned_jobs(db: Database, runner: str) -> list[tuple[str, str]]:
    """Take over the active jobs whose runner holds no lease (this server's previous run included): fail
    those that were running, make the queued ones ``runner``'s. Jobs of live replicas are left alone.
    Returns ``(job id, owner)`` of the jobs queued, to run here."""
    active = (JobState.QUEUED, JobState.RUNNING)
    # the jobs first, then their runners' leases, then only those jobs (each still as it was read): a job
    # that a live replica created in between is never seen here, so never taken from it
    with db.session() as s:
        rows = s.execute(select(JobRecord.id, JobRecord.runner, JobRecord.state).where(JobRecord.state.in_(active)))
        seen = [tuple(row) for row in rows]
    alive = tag_live(db.engine, sorted({r for _, r, _ in seen} - {"", runner})) | {runner}
    queued: list[tuple[str, str]] = []
    with db.session() as s:
        for job_id, was, state in seen:
            if was in alive:
                continue
            job = s.get(JobRecord, job_id, with_for_update=True)
            if job is None or job.runner != was or job.state != state:  # changed since: not ours to judge
                continue
            log.warning("job %s (%s): its runner %r holds no lease; taking it over", job_id, state, was)
            if job.state == JobState.RUNNING:
                job.state, job.error = JobState.FAILED, "the server running it stopped during the job"
                job.finished_at = time.time()
            else:
                job.runner = runner
                queued.append((job.id, job.owner))
    return queued
