"""A process sandbox ends with what owns it and bounds its agents (issue 35).

SIGTERM ends its server promptly, agent commands included; the SIGKILL of the process that started
it ends it too, unless that process handed it over (``release``); a fork bomb or a memory hog in
an agent command fails that command while the server keeps answering.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.confine import memory_cgroup
from rockroll.sandbox.process import ProcessBackend
from rockroll.sandbox.retry import wait_until
from tests.sandbox.conftest import confinement_problem

DEADLINE_S = 20.0
#: how long a killed sandbox may take to be gone: a loaded machine (a clean-clone CI run) once needed over 20 s
GONE_S = 60.0


def _pids_with(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker``."""
    needle, found = marker.encode(), []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and int(proc.name) != os.getpid() and needle in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _described(pids: list[int]) -> str:
    """Each pid with its state and parent, for a failure message."""
    out = []
    for pid in pids:
        try:
            status = dict(
                line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line
            )
            out.append(
                f"{pid} ({status.get('State', '?')}, ppid {status.get('PPid', '?')}, uid {status.get('Uid', '?')})"
            )
        except OSError:
            out.append(f"{pid} (gone)")
    return ", ".join(out) or "none"


def _server_pid(sandbox_id: str) -> int:
    """The pid of sandbox ``sandbox_id``'s Python server (the innermost process with its label)."""
    for pid in _pids_with(f"rockroll.sandbox={sandbox_id}"):
        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:3] == [b"-m", b"rockroll.sandbox.server"]:
            return pid
    raise AssertionError(f"no server process of {sandbox_id}")


def _start(backend: ProcessBackend, **spec: Any) -> Any:
    sid = f"lt{uuid.uuid4().hex[:8]}"
    handle = backend.start(sid, SandboxSpec(**spec), labels={"rockroll.manager": "ltest", "rockroll.sandbox": sid})
    backend.wait_ready(handle, timeout_s=60)
    return handle


def _run_in_background(backend: ProcessBackend, handle: Any, token: str) -> None:
    """An agent command that would run for minutes, marked by ``token`` on its shell's command line."""
    started = threading.Event()

    def run() -> None:
        started.set()
        try:
            backend.exec(handle, f"sleep 300; : {token}", timeout_s=600)
        except Exception:  # noqa: BLE001 - the sandbox goes away under it: expected
            pass

    threading.Thread(target=run, daemon=True).start()
    started.wait(5)
    assert wait_until(lambda: _pids_with(token), DEADLINE_S), "the agent command did not start"


def test_sigterm_ends_the_server_and_its_agent_commands_promptly(state_dir: str) -> None:
    backend = ProcessBackend(state_dir=state_dir)
    handle = _start(backend)
    token = f"agent-{uuid.uuid4().hex}"
    try:
        _run_in_background(backend, handle, token)
        os.kill(_server_pid(handle.sandbox_id), signal.SIGTERM)
        gone = wait_until(
            lambda: not _pids_with(f"rockroll.sandbox={handle.sandbox_id}") and not _pids_with(token), GONE_S
        )
        left = f"{_described(_pids_with(handle.sandbox_id))}; agent: {_described(_pids_with(token))}"
        assert gone, f"left after SIGTERM: {left}"
    finally:
        backend.stop(handle)


OWNER = """
import sys, threading
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.confine import memory_cgroup
from rockroll.sandbox.process import ProcessBackend
backend = ProcessBackend(state_dir=sys.argv[1])
sid, token, release = sys.argv[2], sys.argv[3], sys.argv[4] == "1"
h = backend.start(sid, SandboxSpec(), labels={"rockroll.manager": "ltest", "rockroll.sandbox": sid})
backend.wait_ready(h, timeout_s=60)
threading.Thread(target=backend.exec, args=(h, f"sleep 300; : {token}"), kwargs={"timeout_s": 600}, daemon=True).start()
if release:
    backend.release(h)
print("ready", flush=True)
threading.Event().wait()
"""


@pytest.mark.parametrize("released", [False, True])
def test_sigkill_of_the_owner_ends_its_sandboxes_unless_handed_over(state_dir: str, released: bool) -> None:
    sid, token = f"lt{uuid.uuid4().hex[:8]}", f"agent-{uuid.uuid4().hex}"
    marker = f"rockroll.sandbox={sid}"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, state_dir, sid, token, "1" if released else "0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        assert _pids_with(marker)
        assert wait_until(lambda: _pids_with(token), DEADLINE_S), "the agent command did not start"
        owner.kill()
        owner.wait(timeout=DEADLINE_S)
        if released:  # handed over: it outlives its owner, for a later manager to adopt
            assert not wait_until(lambda: not _pids_with(marker), 1.0)
            assert [h.sandbox_id for h in ProcessBackend(state_dir=state_dir).list_managed("ltest")] == [sid]
        else:
            gone = wait_until(lambda: not _pids_with(marker) and not _pids_with(token), GONE_S)
            left = f"{_described(_pids_with(marker))}; agent: {_described(_pids_with(token))}"
            assert gone, f"left after the owner's SIGKILL: {left}"
    finally:
        if owner.poll() is None:
            owner.kill()
        backend = ProcessBackend(state_dir=state_dir)
        for h in backend.list_managed("ltest"):
            backend.stop(h)
    assert wait_until(lambda: not _pids_with(marker) and not _pids_with(token), GONE_S)


@pytest.fixture
def confined(state_dir: str) -> Any:
    problem = confinement_problem()
    if problem:
        pytest.skip(f"confined process sandboxes cannot run here: {problem}")
    backend = ProcessBackend(state_dir=state_dir)
    handle = _start(backend, pids_limit=64, memory_mb=256)
    yield backend, handle
    backend.stop(handle)


def test_a_fork_bomb_fails_its_command_not_the_confined_sandbox(confined: Any) -> None:
    backend, handle = confined
    r = backend.exec(handle, "bomb() { bomb | bomb & }; bomb; sleep 1", timeout_s=30)
    assert "Cannot fork" in r.stderr or "Resource temporarily unavailable" in r.stderr, r
    assert backend.health(handle).boot_id == handle.boot_id
    assert backend.exec(handle, "echo alive").stdout == "alive\n"


def test_a_memory_hog_fails_its_command_not_the_confined_sandbox(confined: Any) -> None:
    backend, handle = confined
    if memory_cgroup(handle.extra.get("cgroup", "")) is None:
        pytest.skip("no writable cgroup tree here: process sandboxes have no memory limit")
    r = backend.exec(handle, ["python3", "-c", "x = b'a' * (400 * 2**20); print('survived')"], timeout_s=60)
    assert r.exit_code == 137 and r.oom_killed and "survived" not in r.stdout, r
    assert backend.health(handle).boot_id == handle.boot_id
    assert backend.exec(handle, "echo alive").stdout == "alive\n"
