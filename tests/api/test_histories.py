"""A job's metric history and the sandbox restart log outlive a server restart (``api_job_metrics``,
``api_restarts``: :mod:`rockroll.api.server.history`), bounded in size."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from rockroll.api.db import JobRecord
from rockroll.api.db.models import JobMetricPoint, RestartEvent
from rockroll.api.server.app import create_app
from rockroll.api.server.history import MetricHistory
from rockroll.client.job_state import JobState
from tests.api.conftest import make_settings


def _job(rr: object, job_id: str) -> None:
    with rr.db.session() as s:  # type: ignore[attr-defined]
        s.add(JobRecord(id=job_id, owner="dev", kind="eval", config={}, state=JobState.RUNNING, progress=0.0,
                        metrics={}, logs="", error="", created_at=time.time()))  # fmt: skip


def test_metric_and_restart_histories_survive_a_restart(data_dir: Path) -> None:
    settings = make_settings(data_dir, dev_mode=True)
    with TestClient(create_app(settings)) as c:
        rr = c.app.state.rr
        _job(rr, "job-hist")
        for step in range(5):  # through the runner's own update path, as a worker's reports go
            rr.jobs._update("job-hist", metrics={"loss": 1.0 / (step + 1), "note": "text is not plotted"})
        rr.jobs._update("job-hist", state=JobState.SUCCEEDED, metrics={"loss": 0.1})
        before = c.get("/v1/jobs/job-hist/metrics").json()["points"]
        rr.placement.manager.restart_log.append(
            {"time": time.time(), "sandbox_id": "sb-gone", "pool": "sessions", "generation": 1, "reason": "it died"}
        )
    assert [p["metrics"]["loss"] for p in before] == [1.0, 0.5, 1 / 3, 0.25, 0.2, 0.1]
    with TestClient(create_app(settings)) as c:  # a new server on the same database
        after = c.get("/v1/jobs/job-hist/metrics").json()["points"]
        assert after == before
        restarts = c.get("/v1/overview").json()["restarts"]
        assert [(e["sandbox_id"], e["reason"]) for e in restarts] == [("sb-gone", "it died")]


def test_the_stored_histories_stay_bounded(data_dir: Path) -> None:
    with TestClient(create_app(make_settings(data_dir, dev_mode=True))) as c:
        rr = c.app.state.rr
        history = MetricHistory(rr.db, max_points=20, max_jobs=3)
        for j in range(5):
            for step in range(50):
                history.add(f"job-b{j}", {"step": float(step)}, final=step == 49)
        with rr.db.session() as s:
            per_job = dict(s.execute(select(JobMetricPoint.job_id, func.count()).group_by(JobMetricPoint.job_id)).all())
        assert set(per_job) == {"job-b2", "job-b3", "job-b4"}, per_job  # the newest 3 jobs
        assert all(n <= 20 for n in per_job.values()), per_job
        kept = MetricHistory(rr.db, max_points=20).get("job-b4")  # read back: the whole run's shape
        assert kept[0]["metrics"]["step"] == 0.0 and kept[-1]["metrics"]["step"] == 49.0
        log = rr.placement.manager.restart_log
        for i in range(log.maxlen + 30):
            log.append({"time": time.time(), "sandbox_id": f"sb-{i}", "pool": "p", "generation": 1, "reason": "x"})
        with rr.db.session() as s:
            rows = s.execute(select(func.count()).select_from(RestartEvent)).scalar_one()
        assert rows == log.maxlen and list(log)[-1]["sandbox_id"] == f"sb-{log.maxlen + 29}"
