"""One manager per name; default state in the user data dir; no sandbox outlives its command.

Managers run in real subprocesses that get real signals; sandboxes are real processes (process backend).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from rockroll.sandbox.backends import make_backend
from rockroll.sandbox.lease import Lease, ManagerBusy
from rockroll.sandbox.manager import ManagerConfig, SandboxManager
from rockroll.sandbox.models import ManagerLease
from rockroll.sandbox.store import SandboxStore

OWNER = """
import sys, time
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.process import ProcessConfig
# survive_owner: a SIGKILLed owner's sandbox stays for the next manager to adopt (by default it ends too)
backend = ProcessConfig(state_dir=sys.argv[3], survive_owner=True)
m = SandboxManager(backend=backend, name=sys.argv[1], db_url=sys.argv[2], state_dir=sys.argv[3], monitor_interval_s=0.2)
sb = m.create()
print(sb.id, flush=True)
time.sleep(600)
"""


def _running(name: str, state_dir: str) -> list[str]:
    return [h.sandbox_id for h in make_backend("process", state_dir=state_dir).list_managed(name)]


def _leases(url: str) -> list[tuple[str, int]]:
    engine = sa.create_engine(url)
    try:
        with Session(engine) as s:
            return [(r.name, r.pid) for r in s.scalars(sa.select(ManagerLease))]
    finally:
        engine.dispose()


def _default_sigint() -> None:
    """Ctrl-C as a terminal sends it: a runner that started the tests in the background (where SIGINT
    is ignored, and the ignoring is inherited) must not turn the Ctrl-C case into a hang."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_owner(name: str, url: str, state_dir: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER, name, url, state_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("sb-"), proc.stderr.read() if proc.stderr else line
    return proc, line


def test_second_manager_of_a_name_refuses_and_leaves_the_first_alone(make_manager: Any) -> None:
    m1 = make_manager()
    sb = m1.create()
    with pytest.raises(ManagerBusy, match="already running") as e:
        make_manager(name=m1.config.name, db_url=m1.config.db_url)
    assert e.value.pid == os.getpid()
    assert sb.health().boot_id == sb.handle.boot_id  # untouched: still the same live incarnation
    assert _running(m1.config.name, m1.config.state_dir) == [sb.id]
    m1.close(stop_sandboxes=False)  # frees the name: the next one adopts
    m2 = make_manager(name=m1.config.name, db_url=m1.config.db_url)
    assert m2.reconcile_report["adopted"] == [sb.id]


def test_default_state_lives_in_one_user_data_dir(tmp_path: Path, state_dir: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("ROCKROLL_DATA_DIR", str(tmp_path / "data"))
    name = f"t{uuid.uuid4().hex[:8]}"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    m1 = SandboxManager(backend="process", name=name, state_dir=state_dir, monitor_interval_s=None)
    try:
        assert m1.config.db_url == f"sqlite:///{tmp_path}/data/sandboxes.db"
        assert (tmp_path / "data" / "sandboxes.db").is_file() and not (tmp_path / "a" / ".rockroll").exists()
        sb = m1.create()
        monkeypatch.chdir(tmp_path / "b")  # another directory: the same records, so the same guard
        assert ManagerConfig().db_url == m1.config.db_url
        with pytest.raises(ManagerBusy):
            SandboxManager(backend="process", name=name, state_dir=state_dir, monitor_interval_s=None)
        assert _running(name, state_dir) == [sb.id]
    finally:
        m1.close()
    assert _running(name, state_dir) == []


def test_lease_of_a_silent_holder_elsewhere_expires(tmp_path: Path) -> None:
    store = SandboxStore(f"sqlite:///{tmp_path}/l.db", "x")  # migrates the tables
    with Session(store.engine) as s, s.begin():
        s.add(ManagerLease(name="x", holder="h1", host="other-host", pid=1, acquired_at=0.0, heartbeat_at=time.time()))
    with pytest.raises(ManagerBusy, match="other-host"):
        Lease(store.engine, "x", ttl_s=5).acquire()
    with Session(store.engine) as s, s.begin():
        s.get(ManagerLease, "x").heartbeat_at = time.time() - 6
    lease = Lease(store.engine, "x", ttl_s=5)
    lease.acquire()  # silent for longer than the ttl: taken over
    assert _leases(f"sqlite:///{tmp_path}/l.db") == [("x", os.getpid())]
    assert lease.renew() and not lease.lost
    lease.release()
    assert _leases(f"sqlite:///{tmp_path}/l.db") == []
    store.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_leaves_no_sandbox(tmp_path: Path, state_dir: str, sig: int) -> None:
    name, url = f"t{uuid.uuid4().hex[:8]}", f"sqlite:///{tmp_path}/sb.db"
    proc, sb = _start_owner(name, url, state_dir)
    try:
        assert _running(name, state_dir) == [sb]
        proc.send_signal(sig)
        proc.wait(timeout=60)
        assert proc.returncode in (128 + sig, -sig), proc.stderr.read() if proc.stderr else ""
        assert _running(name, state_dir) == []
        assert _leases(url) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        for h in make_backend("process", state_dir=state_dir).list_managed(name):
            make_backend("process", state_dir=state_dir).stop(h)


def test_after_sigkill_the_next_start_takes_over_at_once(tmp_path: Path, state_dir: str) -> None:
    name, url = f"t{uuid.uuid4().hex[:8]}", f"sqlite:///{tmp_path}/sb.db"
    proc, sb = _start_owner(name, url, state_dir)
    proc.kill()
    proc.wait(timeout=30)
    assert _running(name, state_dir) == [sb]  # SIGKILL runs nothing: the sandbox is left
    assert _leases(url) == [(name, proc.pid)]
    t0 = time.monotonic()
    m = SandboxManager(backend="process", name=name, db_url=url, state_dir=state_dir, monitor_interval_s=None)
    try:
        assert time.monotonic() - t0 < 10  # no wait for the lease ttl: its holder is a dead process here
        assert m.reconcile_report["adopted"] == [sb]
        assert _leases(url) == [(name, os.getpid())]
    finally:
        m.close()
    assert _running(name, state_dir) == []


def test_tag_live_names_the_holdings_that_still_hold_their_lease(tmp_path: Path) -> None:
    """A replica asks whether the server of a job or a session still runs by its tag (name@holder): the
    holding itself, not another holding of the same name, and not once it is released."""
    from rockroll.sandbox.lease import tag_live

    store = SandboxStore(f"sqlite:///{tmp_path}/l.db", "x")  # migrates the tables
    lease = Lease(store.engine, "rep-a")
    lease.acquire()
    try:
        assert tag_live(store.engine, [lease.tag, "rep-a@another-holder", "rep-b@h"]) == {lease.tag}
    finally:
        lease.release()
    assert tag_live(store.engine, [lease.tag]) == set()
    assert tag_live(store.engine, []) == set()
