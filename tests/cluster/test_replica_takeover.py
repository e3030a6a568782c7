"""What a replica's death leaves to the other one: its sessions on node agents and its jobs.

Replica ``a`` opens two sessions on the node agent and runs one job with one more queued, then is
SIGKILLed. Replica ``b`` adopts the orphaned sessions (their opener holds no lease): its idle reaper
closes the one nobody uses and keeps the one stepped at the agent; it marks the job that was running
at ``a`` failed and runs the queued one itself (:mod:`rockroll.api.sessions.live`,
:mod:`rockroll.api.jobs.runner`). Real processes on 127.0.0.1 and a PostgreSQL database of their own.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rockroll.client.sdk import ApiClientError, Client
from rockroll.sandbox.node.client import DataPlaneError, DataPlaneSession
from tests.cluster.conftest import ENV, KWARGS
from tests.cluster.test_replicas import PG_URL, deploy_replicas, wait_job_played

pytestmark = pytest.mark.skipif(not PG_URL, reason="set ROCKROLL_TEST_PG_URL (scripts/setup-ci-services.sh)")
QUICK = {"ROCKROLL_SESSION_IDLE_TTL_S": "4", "ROCKROLL_JOB_WORKERS": "1"}  # reaped after 4 s; one job at a time
EVAL = {"env": ENV, "episodes": 100_000, "kwargs": KWARGS}


@pytest.fixture(scope="module")
def after_kill() -> Iterator[dict[str, Any]]:
    """The deployment once ``a`` died holding sessions ``idle`` and ``busy`` and jobs ``ran`` and ``queued``."""
    saved = {k: os.environ.get(k) for k in QUICK}
    os.environ.update(QUICK)
    try:
        gen = deploy_replicas()
        dep = next(gen)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    a = dep["servers"]["a"]
    try:
        with Client(a.url, dep["tokens"]["bob"]) as on_a:
            ran, queued = on_a.create_job("eval", EVAL), on_a.create_job("eval", EVAL)
            wait_job_played(on_a, ran["id"], timeout_s=180)
            assert on_a.get_job(queued["id"])["state"] == "queued"  # one worker: it waits
        with Client(a.url, dep["tokens"]["alice"]) as on_a:
            idle, busy = on_a.create_session(ENV, KWARGS), on_a.create_session(ENV, KWARGS)
        dp = busy["data_plane"]
        stepper = DataPlaneSession(dp["endpoint"], busy["id"], dp["token"])
        stepper.reset(seed=0)
        os.killpg(a.proc.pid, signal.SIGKILL)  # within a second of the opens: a's own reaper never saw them idle
        a.proc.wait(timeout=30)
        a.proc = None
        yield dep | {"jobs": (ran["id"], queued["id"]), "idle": idle, "busy": busy, "stepper": stepper}
        stepper.close()
    finally:
        gen.close()


@pytest.mark.slow
def test_the_surviving_replica_reaps_the_orphaned_idle_session_and_keeps_the_used_one(after_kill: dict) -> None:
    b, stepper = after_kill["servers"]["b"], after_kill["stepper"]
    idle, busy = after_kill["idle"]["id"], after_kill["busy"]["id"]
    with Client(b.url, after_kill["tokens"]["alice"]) as on_b:
        assert {idle, busy} <= {s["id"] for s in on_b.list_sessions()}  # adopted: listed at b
        deadline, reaped = time.monotonic() + 60, False
        while time.monotonic() < deadline and not reaped:  # bounded: the reaper runs every 2 s, TTL 4 s
            if stepper.step_raw("no answer")["truncated"]:  # used at the agent, never through b
                stepper.reset(seed=1)
            reaped = idle not in {s["id"] for s in on_b.list_sessions()}  # a listing is no use: a get would be
            time.sleep(0.3)
        assert reaped, f"b never reaped the orphaned idle session {idle} in 60 s"
        with pytest.raises(ApiClientError) as closed:
            on_b.get_session(idle)
        assert closed.value.status == 404
        token = after_kill["idle"]["data_plane"]["token"]
        with pytest.raises(DataPlaneError) as gone:  # closed at the agent too, not only in the database
            DataPlaneSession(after_kill["idle"]["data_plane"]["endpoint"], idle, token)
        assert gone.value.status == 404
        assert on_b.get_session(busy)["id"] == busy  # kept: stepped at its agent all along
        assert "observation" in on_b.step(busy, "no answer")  # and served through b
        on_b.close_session(busy)


@pytest.mark.slow
def test_the_surviving_replica_fails_the_running_job_and_runs_the_queued_one(after_kill: dict) -> None:
    b = after_kill["servers"]["b"]
    ran, queued = after_kill["jobs"]
    with Client(b.url, after_kill["tokens"]["bob"]) as on_b:
        failed = on_b.wait_job(ran, timeout_s=90)  # b looks every 15 s for jobs of servers without a lease
        assert failed["state"] == "failed" and "stopped during the job" in failed["error"], failed
        wait_job_played(on_b, queued, timeout_s=180)  # taken over: it runs at b now
        on_b.cancel_job(queued)
        assert on_b.wait_job(queued, timeout_s=120)["state"] == "cancelled"
