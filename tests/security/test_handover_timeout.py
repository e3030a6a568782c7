"""Issue 48 item 6, nothing left behind: a handed-over process sandbox that no server adopts stops by itself.

A manager closed with ``stop_sandboxes=False`` hands its sandboxes over (``ProcessBackend.release``); one the
next manager adopts (reconciliation holds it: ``rockroll.sandbox.handover``) keeps running past its adopt
timeout, one nobody adopts ends within it, and ``rockroll sandbox prune --state-dir`` stops what a state
directory still runs without any server. Real process sandboxes; the owner is a child process that goes away.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rockroll.cli.sandbox import sandbox_app
from rockroll.sandbox.base import SandboxHandle, SandboxSpec
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.process import ProcessBackend, ProcessConfig
from rockroll.sandbox.prune import prune
from rockroll.sandbox.retry import wait_until
from tests.sandbox.conftest import state_dir  # noqa: F401 - the fixture

ADOPT_TIMEOUT_S = 3.0
MARGIN_S = 12.0  # the way out (sessions closed, agents killed) on a loaded 2-core machine

# two managers (two names, one database) each start a sandbox and hand it over, then the process exits
OWNER = """
import sys
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.process import ProcessConfig
state, db, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
for name in ("forgotten", "adopted"):
    backend = ProcessConfig(state_dir=state, adopt_timeout_s=timeout)
    m = SandboxManager(name=name, backend=backend, db_url=db, state_dir=state, monitor_interval_s=None, idle_ttl_s=None)
    sb = m.create()
    print(name, sb.handle.ref, flush=True)
    m.close(stop_sandboxes=False)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _tree(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker`` (a sandbox's label)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "cmdline").read_bytes() and _alive(int(proc.name)):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _run_quietly(backend: ProcessBackend, handle: SandboxHandle, cmd: str) -> None:
    try:
        backend.exec(handle, cmd, timeout_s=600)
    except SandboxError:  # the sandbox goes away under it: expected
        pass


def _adopter(state: str, db: str, **overrides: object) -> SandboxManager:
    backend = ProcessConfig(state_dir=state, adopt_timeout_s=ADOPT_TIMEOUT_S)
    return SandboxManager(
        name="adopted", backend=backend, db_url=db, state_dir=state, monitor_interval_s=None, idle_ttl_s=None,
        **overrides,
    )  # fmt: skip


@pytest.mark.slow
def test_a_handed_over_sandbox_stops_unless_adopted_and_again_when_its_adopter_hands_it_over(
    state_dir: str,  # noqa: F811 - the fixture
) -> None:
    db = f"sqlite:///{state_dir}/records.db"
    out = subprocess.run(
        [sys.executable, "-c", OWNER, state_dir, db, str(ADOPT_TIMEOUT_S)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    handed_over = time.monotonic()
    pids = {name: int(pid) for name, pid in (line.split() for line in out.stdout.split("\n") if line)}
    try:
        assert all(_alive(p) for p in pids.values()), "a sandbox did not outlive its owner's handover"
        adopter = _adopter(state_dir, db)
        try:
            assert adopter.reconcile_report["adopted"] and len(adopter.list()) == 1
            # the forgotten one ends by itself, process tree and all, within its timeout
            assert wait_until(lambda: not _alive(pids["forgotten"]), ADOPT_TIMEOUT_S + MARGIN_S)
            assert wait_until(lambda: not _tree("rockroll.manager=forgotten"), MARGIN_S), _tree("forgotten")
            # the adopted one outlives the timeout: its adopter holds it (no monitor probes it here)
            left = handed_over + ADOPT_TIMEOUT_S + 1.5 - time.monotonic()
            assert not wait_until(lambda: not _alive(pids["adopted"]), max(left, 0.5))
            assert adopter.list()[0].exec("echo held", timeout_s=10).stdout == "held\n"
        finally:
            adopter.close(stop_sandboxes=False)  # handed over again: the countdown starts anew
        again = time.monotonic()
        assert wait_until(lambda: not _alive(pids["adopted"]), ADOPT_TIMEOUT_S + MARGIN_S)
        assert time.monotonic() - again >= ADOPT_TIMEOUT_S - 0.5, "it stopped before its timeout"
        # what a sandbox that stopped by itself leaves (its folder; confined, its cgroups) is prune's
        done, failed = prune(state_dir)
        assert sorted(lo.manager for lo in done if lo.pid is None) == ["adopted", "forgotten"] and not failed
    finally:
        _kill([p for p in pids.values() if _alive(p)])
        prune(state_dir)


# an agent command that tries to adopt its own sandbox through the server's socket, printing the answer's status
SELF_ADOPT = """
import http.client, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"POST /adopt HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
r = http.client.HTTPResponse(s)
r.begin()
print(r.status, flush=True)
"""


def test_sandboxed_code_cannot_adopt_its_own_sandbox_and_its_commands_end_with_it(
    state_dir: str,  # noqa: F811 - the fixture
) -> None:
    # unconfined (user=""): agent commands run as the server and can reach its socket
    backend = ProcessBackend(state_dir=state_dir, user="", adopt_timeout_s=ADOPT_TIMEOUT_S)
    sid, token = f"sb-selfadopt{uuid.uuid4().hex[:6]}", f"agent-{uuid.uuid4().hex}"
    labels = {"rockroll.manager": "selfadopt", "rockroll.sandbox": sid, "rockroll.generation": "0"}
    handle = backend.start(sid, SandboxSpec(), labels=labels)
    try:
        backend.wait_ready(handle, timeout_s=60)
        threading.Thread(target=_run_quietly, args=(backend, handle, f"sleep 300; : {token}"), daemon=True).start()
        assert wait_until(lambda: _tree(token), 20), "the agent command did not start"
        backend.release(handle)  # handed over, and nobody adopts it
        tried = backend.exec(handle, [sys.executable, "-c", SELF_ADOPT, handle.socket_path], timeout_s=20)
        assert tried.stdout.strip() == "403", tried
        assert wait_until(lambda: not _alive(int(handle.ref)), ADOPT_TIMEOUT_S + MARGIN_S)
        assert wait_until(lambda: not _tree(token) and not _tree(f"rockroll.sandbox={sid}"), MARGIN_S)
    finally:
        backend.stop(handle)
        _kill(_tree(token))


def test_prune_lists_a_leftover_with_dry_run_then_stops_it(state_dir: str) -> None:  # noqa: F811 - the fixture
    backend = ProcessBackend(state_dir=state_dir, survive_owner=True)  # no lifeline: it outlives everything
    sid = f"sb-leftover{uuid.uuid4().hex[:6]}"
    labels = {"rockroll.manager": "gone-server", "rockroll.sandbox": sid, "rockroll.generation": "0"}
    handle = backend.start(sid, SandboxSpec(), labels=labels)
    stale = Path(state_dir, "gone-server", "sb-ended-g3")  # a sandbox that ended by itself left its folder
    (stale / "ws").mkdir(parents=True)
    (stale / "server.log").write_text("handed over and not adopted within 600 s: stopping\n")
    docker_like = Path(state_dir, "gone-server", "sb-container-g0")  # a Docker sandbox's socket folder: no log
    docker_like.mkdir()
    try:
        backend.wait_ready(handle, timeout_s=60)
        pid = int(handle.ref)
        dry = CliRunner().invoke(sandbox_app, ["prune", "--state-dir", state_dir, "--dry-run"])
        assert dry.exit_code == 0, dry.output
        lines = dry.output.strip().splitlines()
        assert any("would stop" in ln and f"gone-server/{sid}" in ln and str(pid) in ln for ln in lines), lines
        assert any("would remove" in ln and str(stale) in ln for ln in lines), lines
        assert lines[-1].startswith("total: 1 sandbox, 1 leftover folder (dry run")
        assert _alive(pid) and stale.exists()
        real = CliRunner().invoke(sandbox_app, ["prune", "--state-dir", state_dir])
        assert real.exit_code == 0, real.output
        lines = real.output.strip().splitlines()
        assert lines[0].startswith("stopped") and lines[-1].startswith("total: 1 sandbox, 1 leftover folder stopped")
        assert not _alive(pid) and not _tree(f"rockroll.sandbox={sid}")
        assert not Path(handle.extra["dir"]).exists() and not stale.exists() and docker_like.exists()
        again = CliRunner().invoke(sandbox_app, ["prune", "--state-dir", state_dir])
        assert again.output.strip() == "total: 0 sandboxes, 0 leftover folders stopped and removed"
    finally:
        backend.stop(handle)  # its process group, folder and cgroups, if the test failed before prune


def test_prune_of_a_bad_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for bad, says in ((tmp_path / "missing", "does not exist"), (tmp_path / "file", "is not a directory")):
        if bad.name == "file":
            bad.write_text("")
        out = CliRunner().invoke(sandbox_app, ["prune", "--state-dir", str(bad)])
        assert out.exit_code == 2, out.output
        assert out.output.strip().count("\n") == 0 and out.output.startswith("error: ") and says in out.output
