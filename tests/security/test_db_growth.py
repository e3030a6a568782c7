"""Issue 13, item 10: however much jobs log and report, the database, its WAL and ``/v1/overview`` stay bounded.

Attacks (in-process app, real SQLite, real process sandboxes and job workers): a running job floods
its log with 5 MB of lines and reports thousands of new metric names through the same calls its
worker's messages take; a server holding 1,000 sandboxes and 100 jobs with big logs, big configs and
long metric histories (synthetic records) is polled for its overview.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fastapi.testclient import TestClient

from rockroll.api.db import JobRecord, SandboxOwner
from rockroll.api.routes.ui import MAX_ITEMS
from rockroll.api.server.app import create_app
from rockroll.client.job_state import JobState
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.managed import ManagedSandbox, SandboxState
from tests.api.conftest import make_settings

OVERVIEW_BUDGET = 100_000


def _wait(c: TestClient, job_id: str, timeout_s: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    job = c.get(f"/v1/jobs/{job_id}").json()
    while job["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
        job = c.get(f"/v1/jobs/{job_id}").json()
    return job


def _db_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("rockroll.db*"))


def test_a_flooding_job_keeps_its_logs_metrics_and_the_wal_bounded(data_dir: Path) -> None:
    settings = make_settings(data_dir, dev_mode=True, job_log_max_bytes=50_000, stop_sandboxes_on_exit=True)
    with TestClient(create_app(settings)) as c:
        rr = c.app.state.rr
        job = c.post("/v1/jobs", json={"kind": "eval", "config": {"env": "FrozenLake-v0", "episodes": 100_000}}).json()
        deadline = time.monotonic() + 60
        while "worker pid" not in c.get(f"/v1/jobs/{job['id']}/logs").text:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        line = "x" * 1000
        for i in range(5000):  # what the worker's log, report and metric messages call, 5 MB of log in all
            rr.jobs._update(job["id"], log=f"line {i} {line}")
            if i % 2 == 0:
                rr.jobs._update(job["id"], progress=0.5, metrics={f"flood/{i}/{k}": float(k) for k in range(20)})
        c.post(f"/v1/jobs/{job['id']}/cancel")
        done = _wait(c, job["id"])
        assert done["state"] == "cancelled"
        assert len(done["metrics"]) <= 256
        with rr.db.session() as s:
            assert len(s.get(JobRecord, job["id"]).logs) <= 8_000  # the record keeps the tail only
        logs = c.get(f"/v1/jobs/{job['id']}/logs")
        assert len(logs.content) <= 200_000 and "job cancelled" in logs.text and "line 4999" in logs.text
        assert c.get(f"/v1/jobs/{job['id']}/logs?tail=3").text.count("\n") == 3
        files = list((data_dir / "jobs" / ".logs" / job["id"]).iterdir())
        assert files and all(f.stat().st_size <= 50_000 for f in files) and len(files) <= 4  # rotated, one older
        assert _db_bytes(data_dir) < 5_000_000, sorted(
            (p.name, p.stat().st_size) for p in data_dir.glob("rockroll.db*")
        )
        wal = data_dir / "rockroll.db-wal"
        deadline = time.monotonic() + 30  # the runner checkpoints right after it records the job's end
        while wal.exists() and wal.stat().st_size >= 1_000_000 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not wal.exists() or wal.stat().st_size < 1_000_000  # checkpointed when the job ended


def _synthetic_sandboxes(n: int) -> list[ManagedSandbox]:
    out = []
    for i in range(n):
        sb = ManagedSandbox(f"sb-synthetic-{i:04d}", SandboxSpec(), SimpleNamespace(name="process"), pool="user")
        sb.state = SandboxState.READY
        out.append(sb)
    return out


def _synthetic_jobs(rr: Any, n: int) -> None:
    now = time.time()
    with rr.db.session() as s:
        for i in range(n):
            s.add(
                JobRecord(
                    id=f"job-synthetic{i:04d}",
                    owner="dev",
                    kind="eval",
                    state=JobState.SUCCEEDED,
                    progress=1.0,
                    config={"env": "FrozenLake-v0", "kwargs": {"pad": "c" * 20_000}},
                    metrics={f"eval/env{k}/success": 0.5 for k in range(300)},
                    logs="l" * 200_000,
                    error="",
                    created_at=now + i,
                )
            )
    for i in range(n):
        for step in range(500):
            rr.metric_history.add(f"job-synthetic{i:04d}", {f"m{k}": step * 0.1 + k for k in range(20)})


def test_the_overview_stays_small_with_1000_sandboxes_and_100_jobs(data_dir: Path, monkeypatch: Any) -> None:
    with TestClient(create_app(make_settings(data_dir, dev_mode=True, stop_sandboxes_on_exit=True))) as c:
        rr = c.app.state.rr
        fakes = _synthetic_sandboxes(1000)
        real = rr.placement.list
        monkeypatch.setattr(rr.placement, "list", lambda: real() + fakes)
        with rr.db.session() as s:
            s.add_all(SandboxOwner(sandbox_id=sb.id, owner="alice") for sb in fakes)
        for i in range(500):
            rr.placement.manager.restart_log.append(
                {
                    "time": time.time(),
                    "sandbox_id": fakes[i].id,
                    "pool": "user",
                    "generation": 1,
                    "reason": "dead " * 40,
                }
            )
        _synthetic_jobs(rr, 100)
        for limit in ("", f"?limit={MAX_ITEMS}"):
            r = c.get(f"/v1/overview{limit}")
            assert r.status_code == 200 and len(r.content) <= OVERVIEW_BUDGET, len(r.content)
            o = r.json()
            assert o["summary"]["sandboxes"] >= 1000 and o["summary"]["sandboxes_by_state"]["ready"] >= 1000
            assert o["totals"]["sandboxes"] >= 1000 and o["totals"]["restarts"] >= 500
            assert 0 < len(o["sandboxes"]) <= MAX_ITEMS and 0 < len(o["jobs"]) <= 20
            assert o["jobs"][0]["history"] and "config" not in o["jobs"][0]
        assert c.get(f"/v1/overview?limit={MAX_ITEMS + 1}").status_code == 422
        # the rest is paged through the list routes
        page = c.get("/v1/jobs?limit=50&offset=50").json()["jobs"]
        assert len(page) == 50 and page[0]["id"] == "job-synthetic0049"
