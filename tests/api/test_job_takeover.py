"""Job takeover between replicas (:meth:`rockroll.api.jobs.runner.JobRunner.recover`): only the jobs of a
server without a lease, judged on the jobs read before the leases were looked at.

The race this pins down: a replica read the runners of the active jobs, then the jobs; a job that
another, live replica created between the two reads had a runner missing from the first read, so it
was taken for a dead one's and failed ("the server running it stopped during the job"): on a loaded
machine, a job cancelled through another replica ended ``failed``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from rockroll.api.db import Database, JobRecord
from rockroll.api.jobs import recovery as runner_mod  # where the takeover reads the leases
from rockroll.api.jobs.paths import JobDirs
from rockroll.api.jobs.runner import JobRunner
from rockroll.client.job_state import JobState


def _job(db: Database, job_id: str, runner: str, state: JobState) -> None:
    with db.session() as s:
        s.add(JobRecord(id=job_id, owner="o", kind="eval", config={}, state=state, progress=0.0, metrics={},
                        logs="", error="", created_at=time.time(), runner=runner))  # fmt: skip


def _state(db: Database, job_id: str) -> tuple[str, str]:
    with db.session() as s:
        rec = s.get(JobRecord, job_id)
        assert rec is not None
        return rec.state, rec.runner


def test_a_job_a_live_replica_creates_during_the_look_is_left_to_it(tmp_path: Path, monkeypatch: Any) -> None:
    db = Database(f"sqlite:///{tmp_path}/db.sqlite")
    db.migrate()
    jobs = JobRunner(db, lambda *a, **k: None, dirs=JobDirs(tmp_path / "jobs"), runner="b@me")
    try:
        _job(db, "job-dead-running", "gone@x", JobState.RUNNING)
        _job(db, "job-dead-queued", "gone@x", JobState.QUEUED)
        real = runner_mod.tag_live

        def tag_live_while_a_creates(engine: Any, tags: list[str]) -> set[str]:
            _job(db, "job-of-a", "a@live", JobState.RUNNING)  # replica a starts a job right now
            return real(engine, tags) | ({"a@live"} & set(tags))  # a holds its lease (said when asked)

        monkeypatch.setattr(runner_mod, "tag_live", tag_live_while_a_creates)
        monkeypatch.setattr(jobs, "_pool", type("NoPool", (), {"submit": lambda *a: None})())  # nothing runs
        assert jobs.recover() == ["job-dead-queued"]
        assert _state(db, "job-of-a") == (JobState.RUNNING, "a@live")  # a's: untouched
        assert _state(db, "job-dead-running")[0] == JobState.FAILED
        assert _state(db, "job-dead-queued") == (JobState.QUEUED, "b@me")
    finally:
        jobs._closing.set()
        db.close()


@pytest.mark.parametrize("changed", ["finished", "taken"])
def test_a_job_that_changed_since_it_was_read_is_not_judged(tmp_path: Path, monkeypatch: Any, changed: str) -> None:
    db = Database(f"sqlite:///{tmp_path}/db.sqlite")
    db.migrate()
    jobs = JobRunner(db, lambda *a, **k: None, dirs=JobDirs(tmp_path / "jobs"), runner="b@me")
    try:
        _job(db, "job-1", "gone@x", JobState.RUNNING)

        def meanwhile(engine: Any, tags: list[str]) -> set[str]:
            with db.session() as s:
                rec = s.get(JobRecord, "job-1")
                if changed == "finished":
                    rec.state = JobState.SUCCEEDED
                else:
                    rec.runner = "c@other"  # another replica took it over first
            return set()

        monkeypatch.setattr(runner_mod, "tag_live", meanwhile)
        assert jobs.recover() == []
        state, runner = _state(db, "job-1")
        assert (state, runner) == (
            (JobState.SUCCEEDED, "gone@x") if changed == "finished" else (JobState.RUNNING, "c@other")
        )
    finally:
        jobs._closing.set()
        db.close()
