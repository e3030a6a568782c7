"""Issue 48, items 3 and 4: what one owner may store and hold, and what it keeps, never at another's cost.

Attacks, as owner bob of a shared ``rockroll serve-api`` (real SQLite, process sandboxes, job workers):
configs just over the 1 MiB cap (the database and the server's memory do not grow), a ninth active
job, a page of big jobs, ``total_steps: 10**12``, a job that would run for ever (carol's wall-clock cap
is 1.5 s here, through ``job_owner_caps``), two long jobs on a 2-worker server (alice's short job still
runs beside them), a new job past the kept cap (dave keeps 3: only his oldest finished job goes), and
more jobs' metric histories and sandbox restarts than an owner keeps (alice's points and restarts stay, after
a restart too).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from rockroll.api.db import Database, JobRecord, SandboxOwner
from rockroll.api.db.models import JobMetricPoint, RestartEvent
from rockroll.api.jobs.fair import FairPool
from rockroll.api.server.history import MetricHistory, RestartLog
from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
from rockroll.client.job_state import JobState

OWNER_CAPS = {"carol": {"max_job_wall_s": 1.5}, "dave": {"max_kept_jobs_per_owner": 3}}
LONG = {"env": "FrozenLake-v0", "episodes": 100_000}  # minutes of random play
SHORT = {"env": "FrozenLake-v0", "episodes": 1}
MiB = 1 << 20


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerProc]:
    """A real server with 2 job workers (and the default reserve of 1) and tokens alice, bob, carol, dave."""
    proc = ServerProc(scratch_dir("owner-caps"), env={"ROCKROLL_JOB_OWNER_CAPS": json.dumps(OWNER_CAPS)})
    proc.tokens = {n: create_token(proc.db_url, n) for n in ("alice", "bob", "carol", "dave")}  # type: ignore[attr-defined]
    proc.start()
    yield proc
    proc.cleanup()


def _api(srv: ServerProc, who: str) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {srv.tokens[who]}"}, timeout=60)  # type: ignore[attr-defined]


def _submit(c: httpx.Client, config: dict[str, Any], kind: str = "eval") -> httpx.Response:
    return c.post("/v1/jobs", json={"kind": kind, "config": config})


def _until(c: httpx.Client, job_id: str, states: tuple[str, ...], timeout_s: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while (job := c.get(f"/v1/jobs/{job_id}").json())["state"] not in states:
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    return job


def _db_bytes(srv: ServerProc) -> int:
    return sum(p.stat().st_size for p in srv.data_dir.glob("rockroll.db*"))


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _finished(db: Database, job_id: str, owner: str, created_at: float, config: dict[str, Any] | None = None) -> None:
    with db.session() as s:
        s.add(JobRecord(id=job_id, owner=owner, kind="eval", config=config or {}, state=JobState.SUCCEEDED,
                        progress=1.0, metrics={}, logs="", error="", created_at=created_at))  # fmt: skip


@pytest.fixture(scope="module")
def bob_busy(srv: ServerProc) -> Iterator[list[str]]:
    """Bob's 8 long jobs: 2 hold the shared workers, 6 wait. Cancelled at the end (the tests that take it
    come last: the module's other jobs run without them)."""
    with _api(srv, "bob") as c:
        ids = []
        for _ in range(8):
            r = _submit(c, LONG)
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        deadline = time.monotonic() + 60
        while sum(c.get(f"/v1/jobs/{i}").json()["state"] == "running" for i in ids) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        yield ids
        for i in ids:
            c.post(f"/v1/jobs/{i}/cancel")
        for i in ids:
            _until(c, i, ("cancelled", "failed", "succeeded"))


def test_one_owners_histories_never_push_out_anothers(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/db.sqlite")
    db.migrate()
    try:
        _finished(db, "job-a", "alice", 1.0)
        history = MetricHistory(db, max_jobs=20)  # 20 jobs' histories per owner (the server keeps 200)
        for step in range(31):
            history.add("job-a", {"loss": float(step)}, final=step == 30)
        for j in range(30):  # bob's 30 short jobs, newer than alice's (the attack: 230 against 200)
            _finished(db, f"job-b{j:03d}", "bob", 10.0 + j)
            history.add(f"job-b{j:03d}", {"loss": 1.0}, final=True)
        assert len(MetricHistory(db).get("job-a")) == 31  # a new server reads it back
        with db.session() as s:
            bobs = s.scalar(
                select(func.count(func.distinct(JobMetricPoint.job_id))).where(JobMetricPoint.job_id != "job-a")
            )
            s.add_all([SandboxOwner(sandbox_id="sb-a", owner="alice"), SandboxOwner(sandbox_id="sb-b", owner="bob")])
        assert bobs == history.max_jobs  # bob's own oldest went
        log = RestartLog(db, "m", max_events=20)  # the server keeps 500 per owner
        event = {"pool": "user", "generation": 1, "reason": "died"}
        for i in range(3):
            log.append({**event, "time": float(i), "sandbox_id": "sb-a"})
        for i in range(60):  # bob's sandbox crashes over and over
            log.append({**event, "time": 10.0 + i, "sandbox_id": "sb-b"})
        again = RestartLog(db, "m", max_events=20)  # after a restart
        for kept in (log, again):
            owners = [e["sandbox_id"] for e in kept]
            assert owners.count("sb-a") == 3 and owners.count("sb-b") == 20, (len(owners), owners[:5])
            assert list(kept)[-1]["time"] == 69.0
        with db.session() as s:
            assert s.scalar(select(func.count()).select_from(RestartEvent)) == 23
    finally:
        db.close()


class _Jobs:
    """Jobs for a :class:`FairPool` that run until released; ``started`` in the order they started."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self.cond = threading.Condition()

    def run(self, job_id: str) -> None:
        with self.cond:
            self.started.append(job_id)
            gate = self.gates.setdefault(job_id, threading.Event())
            self.cond.notify_all()
        gate.wait(30)

    def release(self, job_id: str) -> None:
        with self.cond:
            self.gates.setdefault(job_id, threading.Event()).set()

    def wait_started(self, n: int) -> list[str]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.started) >= n, timeout=10), self.started
            return list(self.started)


def test_the_fair_pool_serves_the_owner_running_fewest_and_keeps_a_reserve() -> None:
    jobs = _Jobs()
    pool = FairPool(jobs.run, workers=2, reserve=1)
    try:
        for job_id in ("b1", "b2", "b3"):
            pool.submit(job_id, "bob")
        assert sorted(jobs.wait_started(2)) == ["b1", "b2"]  # bob alone: both shared workers, never the reserve
        pool.submit("a1", "alice")
        assert jobs.wait_started(3)[-1] == "a1"  # at once, on the reserve
        pool.submit("c1", "carol")
        pool.submit("a2", "alice")
        jobs.release("b1")  # a shared worker frees: carol runs none, alice and bob one each
        assert jobs.wait_started(4)[-1] == "c1"
        jobs.release("a1")  # the reserve frees: alice runs none now
        assert jobs.wait_started(5)[-1] == "a2"
        with jobs.cond:  # b3 waits: bob holds a shared worker, the reserve is another owner's
            assert not jobs.cond.wait_for(lambda: "b3" in jobs.started, timeout=0.3)
    finally:
        for job_id in ("b1", "b2", "b3", "a1", "a2", "c1"):
            jobs.release(job_id)
        pool.shutdown()
    shared = FairPool(jobs.run, workers=2, reserve=0, share=lambda _owner, _n: 1)  # job_workers_per_owner=1
    jobs.started.clear()
    try:
        shared.submit("x1", "bob")
        shared.submit("x2", "bob")
        shared.submit("y1", "alice")
        assert sorted(jobs.wait_started(2)) == ["x1", "y1"]
    finally:
        for job_id in ("x1", "x2", "y1"):
            jobs.release(job_id)
        shared.shutdown()


def test_configs_over_the_cap_are_refused_and_grow_nothing(srv: ServerProc) -> None:
    pid = srv.proc.pid  # type: ignore[union-attr]
    with _api(srv, "bob") as c:
        before = c.get("/v1/jobs").json()["jobs"]  # the routes warmed up before measuring
        rss, db = _rss_mib(pid), _db_bytes(srv)
        for i in range(4):  # configs just over the cap (the attack sent 14 MiB ones)
            r = _submit(c, {**SHORT, "kwargs": {"pad": str(i) * (MiB + 1024)}})
            assert r.status_code == 413, r.text
            err = r.json()["error"]
            assert err["code"] == "too_large" and "ROCKROLL_MAX_JOB_CONFIG_BYTES" in err["message"]
            assert err["details"]["limit"] == MiB and err["details"]["size"] > MiB
        assert c.get("/v1/jobs").json()["jobs"] == before  # nothing stored
        assert _db_bytes(srv) - db < 512 * 1024
        assert _rss_mib(pid) - rss <= 50


def test_a_train_job_of_10_to_the_12_steps_and_too_many_episodes_are_422(srv: ServerProc) -> None:
    with _api(srv, "bob") as c:
        r = _submit(c, {"total_steps": 10**12}, kind="train")
        assert r.status_code == 422 and r.json()["error"]["code"] == "over_cap", r.text
        err = r.json()["error"]
        assert "total_steps" in err["message"] and "ROCKROLL_MAX_JOB_TOTAL_STEPS" in err["message"]
        assert err["details"]["caps"][0]["field"] == "total_steps"
        many = {"engine": {"kind": "random"}, "envs": [{"env": "FrozenLake-v0", "episodes": 2_000_000}]}
        r = _submit(c, many)
        assert r.status_code == 422 and "ROCKROLL_MAX_JOB_EPISODES" in r.json()["error"]["message"], r.text


def test_list_pages_stay_within_their_byte_cap(srv: ServerProc) -> None:
    db = Database(srv.db_url)
    try:
        for i in range(6):  # 6 jobs of 0.9 MiB configs, within the config cap: 5.4 MiB in all
            _finished(
                db, f"job-page{i}", "erin", 1000.0 + i, {"env": "FrozenLake-v0", "kwargs": {"pad": "p" * 900_000}}
            )
    finally:
        db.close()
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        c.headers["Authorization"] = f"Bearer {create_token(srv.db_url, 'erin')}"
        seen, offset = [], 0
        while True:
            r = c.get("/v1/jobs", params={"limit": 100, "offset": offset})
            assert r.status_code == 200 and len(r.content) <= 4 * MiB, len(r.content)
            page = r.json()["jobs"]
            assert page and all(j["config"]["kwargs"]["pad"] for j in page)
            seen += [j["id"] for j in page]
            if "x-next-offset" not in r.headers:
                break
            offset = int(r.headers["x-next-offset"])
            assert f"offset={offset}" in r.headers["link"]
    assert seen == [f"job-page{i}" for i in reversed(range(6))]  # every job once, newest first


@pytest.mark.slow  # a job worker's start (seconds)
def test_a_job_past_its_wall_clock_cap_is_cancelled_saying_why(srv: ServerProc) -> None:
    with _api(srv, "carol") as c:
        job = _submit(c, LONG).json()
        done = _until(c, job["id"], ("succeeded", "failed", "cancelled"))
        assert done["state"] == "cancelled", done
        assert "wall-clock limit of 1.5 s" in done["error"] and "max_job_wall_s" in done["error"]
        assert done["finished_at"] - done["started_at"] < 30


def test_a_new_job_deletes_only_its_owners_oldest_finished_one(srv: ServerProc) -> None:
    db = Database(srv.db_url)
    try:
        for i in range(3):
            _finished(db, f"job-dave{i}", "dave", 100.0 + i)
        _finished(db, "job-alice-old", "alice", 1.0)  # older than all of dave's
        with db.session() as s:
            s.add_all(JobMetricPoint(job_id="job-dave0", t=100.0, metrics={"x": 1.0}) for _ in range(3))
        with _api(srv, "dave") as c:
            job = _submit(c, SHORT).json()
            kept = {j["id"] for j in c.get("/v1/jobs").json()["jobs"]}
            assert kept == {"job-dave1", "job-dave2", job["id"]}
            assert c.get("/v1/jobs/job-dave0").status_code == 404
            _until(c, job["id"], ("succeeded", "failed", "cancelled"))
        with db.session() as s:
            assert s.get(JobRecord, "job-alice-old") is not None
            assert not s.scalar(select(func.count()).where(JobMetricPoint.job_id == "job-dave0"))
    finally:
        db.close()


def test_the_ninth_active_job_is_429(srv: ServerProc, bob_busy: list[str]) -> None:
    with _api(srv, "bob") as c:
        r = _submit(c, SHORT)
        assert r.status_code == 429 and r.json()["error"]["code"] == "capacity", r.text
        assert "ROCKROLL_MAX_ACTIVE_JOBS_PER_OWNER" in r.json()["error"]["message"]
        assert r.json()["error"]["details"]["limit"] == 8


@pytest.mark.slow  # a job worker's start (seconds)
def test_alices_short_job_runs_while_bobs_long_ones_hold_the_workers(srv: ServerProc, bob_busy: list[str]) -> None:
    with _api(srv, "alice") as a, _api(srv, "bob") as b:
        job = _submit(a, SHORT).json()
        done = _until(a, job["id"], ("succeeded", "failed", "cancelled"))
        assert done["state"] == "succeeded", done
        states = [b.get(f"/v1/jobs/{i}").json()["state"] for i in bob_busy]
        assert states.count("running") == 2 and states.count("queued") == 6, states  # bob's kept their workers
        assert a.get(f"/v1/jobs/{job['id']}/metrics").json()["points"]
