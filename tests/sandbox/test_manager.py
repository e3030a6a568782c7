"""SandboxManager on the process backend: sessions, fork, monitor, restart, pools, persistence."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

import rockroll.envhub as envhub
from rockroll.envhub.errors import UnknownEnvError
from rockroll.envs.errors import ResetNeeded
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import CapacityError, SandboxLost, SandboxNotFound
from rockroll.sandbox.models import SandboxRecord
from rockroll.sandbox.pool import PoolConfig
from tests.sandbox.conftest import leftovers, trajectory


@pytest.mark.parametrize("env_id", ["FrozenLake-v0", "Sokoban-v0"])
def test_session_plays_exactly_like_in_process(make_manager: Any, env_id: str) -> None:
    m = make_manager()
    with m.open_session(env_id) as remote:
        local = envhub.make(env_id)
        assert remote.system_prompt() == local.system_prompt()
        for seed in (0, 11):
            assert trajectory(remote, seed) == trajectory(local, seed)


def test_fork_gives_two_independent_sessions(make_manager: Any) -> None:
    m = make_manager()
    s = m.open_session("FrozenLake-v0")
    s.reset(seed=5)
    s.step("<answer>Right</answer>")
    f = s.fork()
    assert f.session_id != s.session_id and f.get_state() == s.get_state()
    local = envhub.make("FrozenLake-v0")
    local.set_state(s.get_state())
    assert f.step("<answer>Down</answer>") == local.step("<answer>Down</answer>")
    s_obs = s.step("<answer>Left</answer>")[0]
    assert s_obs != local.render()
    assert s.sandbox.sessions == 2
    s.close()
    f.close()
    assert s.sandbox.sessions == 0


def test_env_errors_surface_typed(make_manager: Any) -> None:
    m = make_manager()
    with pytest.raises(UnknownEnvError):
        m.open_session("NoSuchEnv-v0")
    s = m.open_session("FrozenLake-v0")
    with pytest.raises(ResetNeeded):
        s.step("<answer>Up</answer>")
    assert m.list()[0].sessions == 1  # the failed make gave its slot back


def test_killed_sandbox_is_replaced_and_sessions_lost(make_manager: Any) -> None:
    m = make_manager()
    s = m.open_session("FrozenLake-v0")
    s.reset(seed=1)
    sb = s.sandbox
    old_ref = sb.handle.ref
    os.killpg(int(old_ref), signal.SIGKILL)
    assert m.wait_until(lambda: sb.state == "ready" and sb.generation == 1, 15)
    assert sb.handle.ref != old_ref and sb.restarts == 1 and sb.id == m.list()[0].id
    with pytest.raises(SandboxLost):
        s.step("<answer>Up</answer>")
    s.close()  # closing a lost session is fine
    with m.open_session("FrozenLake-v0") as s2:  # retry works at once
        s2.reset(seed=1)
    assert [h.ref for h in m.backend.list_managed(m.config.name)] == [sb.handle.ref]


def test_a_sandbox_holding_sessions_nobody_holds_is_replaced(make_manager: Any) -> None:
    """Sessions in a shared sandbox that its manager never opened (a dead server's open that ended after it
    died, a close that never arrived) are found by the probes and the sandbox replaced; one whose sessions
    the manager holds is left alone."""
    m = make_manager(replace_stray=True)
    ours = m.open_session("FrozenLake-v0")
    kept = ours.sandbox
    stray = m.create()
    client = stray.client()
    try:
        client.call("env.make", env_id="FrozenLake-v0", kwargs={})  # opened behind the manager's back
    finally:
        client.close()
    assert m.wait_until(lambda: stray.generation == 1 and stray.state == "ready", 20), stray
    seen: list[object] = []

    def probed_five_more_times() -> bool:  # the monitor keeps probing the sandbox whose session is the manager's
        if kept.last_health is not None and (not seen or kept.last_health is not seen[-1]):
            seen.append(kept.last_health)
        return len(seen) >= 5

    assert m.wait_until(probed_five_more_times, 20)
    assert kept.generation == 0 and kept.opened == 1 and ours.reset(seed=0)
    ours.close()
    assert stray.last_health is not None and m.wait_until(lambda: stray.last_health.sessions == 0, 10)


def test_hung_sandbox_is_replaced_after_failed_probes(make_manager: Any) -> None:
    m = make_manager(failure_threshold=2, probe_timeout_s=0.3)
    sb = m.create()
    os.killpg(int(sb.handle.ref), signal.SIGSTOP)  # alive but silent
    assert m.wait_until(lambda: sb.generation == 1 and sb.state == "ready", 20)
    assert sb.failures == 0 and sb.restarts == 1


def test_a_replacement_whose_stop_fails_is_retried(make_manager: Any, monkeypatch: Any) -> None:
    """A backend error while stopping the old server must not leave the sandbox stuck restarting."""
    m = make_manager(failure_threshold=2, probe_timeout_s=0.3)
    sb = m.create()
    real_stop, calls = m.backend.stop, []

    def flaky_stop(handle: Any) -> None:
        calls.append(handle.ref)
        if len(calls) == 1:
            raise RuntimeError("the daemon refused to remove the container")
        real_stop(handle)

    monkeypatch.setattr(m.backend, "stop", flaky_stop)
    os.killpg(int(sb.handle.ref), signal.SIGKILL)
    assert m.wait_until(lambda: sb.state == "ready" and sb.generation >= 2, 20), (sb.state, sb.generation)
    assert len(calls) >= 2 and calls[0] == calls[1]  # the same old server, stopped on the second try
    with m.open_session("FrozenLake-v0") as s:
        s.reset(seed=1)


def test_manager_restart_adopts_removes_and_restores(make_manager: Any) -> None:
    m1 = make_manager()
    kept = m1.create()
    lost = m1.create()
    s = kept.open_session("FrozenLake-v0")
    s.reset(seed=2)
    m1.close(stop_sandboxes=False)
    os.killpg(int(lost.handle.ref), signal.SIGKILL)  # dies while no manager watches
    orphan = m1.backend.start(
        "sb-orphan", SandboxSpec(), labels={"rockroll.manager": m1.config.name, "rockroll.sandbox": "sb-orphan"}
    )
    m1.backend.wait_ready(orphan)

    m2 = make_manager(name=m1.config.name, db_url=m1.config.db_url)
    assert m2.reconcile_report["removed"] == ["sb-orphan"]
    assert m2.reconcile_report["adopted"] == [kept.id]
    assert m2.reconcile_report["restarted"] == [lost.id]
    assert m2.wait_until(lambda: all(sb.state == "ready" for sb in m2.list()), 15)
    assert sorted(sb.id for sb in m2.list()) == sorted([kept.id, lost.id])
    assert m2.get(lost.id).generation == lost.generation + 1
    adopted = m2.get(kept.id)
    assert adopted.health().boot_id == kept.handle.boot_id and adopted.sessions == 1
    assert len(s.step("<answer>Down</answer>")) == 5  # the old session object still plays
    assert sorted(leftovers(m2)) == sorted(sb.handle.ref for sb in m2.list())


def test_records_are_persisted_in_sqlite(make_manager: Any, tmp_path: Any) -> None:
    m = make_manager()
    sb = m.create()
    engine = create_engine(m.config.db_url)
    with Session(engine) as db:
        rec = db.scalars(select(SandboxRecord).where(SandboxRecord.id == sb.id)).one()
        assert (rec.manager, rec.backend, rec.state, rec.ref) == (m.config.name, "process", "ready", sb.handle.ref)
        assert rec.spec["memory_mb"] == 512
    m.delete(sb.id)
    with Session(engine) as db:
        assert db.scalars(select(SandboxRecord)).all() == []
    engine.dispose()


def test_capacity_error_names_active_and_limit(make_manager: Any) -> None:
    m = make_manager(max_sandboxes=2)
    m.create()
    m.create()
    with pytest.raises(CapacityError) as e:
        m.create()
    assert (e.value.active, e.value.limit) == (2, 2)


def test_sessions_go_to_the_least_loaded_sandbox(make_manager: Any) -> None:
    m = make_manager(default_spec=SandboxSpec(max_sessions=2))
    a, b = m.create(), m.create()
    sessions = [m.open_session("FrozenLake-v0") for _ in range(4)]
    assert (a.sessions, b.sessions) == (2, 2)
    sessions[0].close()
    freed = sessions[0].sandbox
    assert m.open_session("FrozenLake-v0").sandbox is freed
    s5 = m.open_session("FrozenLake-v0")  # both full: a third sandbox starts
    assert s5.sandbox not in (a, b) and len(m.list()) == 3


def test_warm_pool_tops_up_and_leases_fast(make_manager: Any) -> None:
    pool = PoolConfig(spec=SandboxSpec(name="warm"), min_idle=2, max_total=3)
    m = make_manager(pools=(pool,))
    assert m.wait_until(lambda: sum(sb.state == "ready" for sb in m.members("warm")) == 2, 20)
    t = time.perf_counter()
    sb = m.acquire("warm")
    assert time.perf_counter() - t < 0.1 and sb.leased and sb.exec("true").ok
    assert m.wait_until(lambda: len(m.members("warm")) == 3, 20)  # refilled to 2 idle, max_total 3
    m.acquire("warm")
    m.acquire("warm")
    with pytest.raises(CapacityError):
        m.acquire("warm", timeout_s=0.2)
    m.release(sb)
    with pytest.raises(SandboxNotFound):
        m.get(sb.id)
    with pytest.raises(SandboxLost):
        sb.exec("true")


def test_idle_sandboxes_are_reaped(make_manager: Any) -> None:
    m = make_manager(idle_ttl_s=0.3)
    sb = m.create()
    busy = m.create()
    s = busy.open_session("FrozenLake-v0")
    assert m.wait_until(lambda: sb.deleted, 10)
    assert not busy.deleted and s.reset(seed=0)
    assert m.wait_until(lambda: leftovers(m) == [busy.handle.ref], 10)


def test_restart_and_delete_by_id(make_manager: Any) -> None:
    m = make_manager()
    sb = m.create()
    boot = sb.handle.boot_id
    m.restart(sb.id)
    assert sb.generation == 1 and sb.handle.boot_id != boot and sb.health().sessions == 0
    m.delete(sb.id)
    assert m.list() == [] and leftovers(m) == []
    with pytest.raises(SandboxNotFound):
        m.delete(sb.id)
