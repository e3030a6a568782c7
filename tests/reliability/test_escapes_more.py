"""Escapes not covered by tests/sandbox/test_escapes.py (Docker backend, each contained and reported).

* reaching the control plane: a real ``rockroll serve`` listens on host loopback; the sandbox
  cannot connect to it on any host address;
* filling the workspace: writes stop with ``ENOSPC`` at ``workspace_mb``, the sandbox stays
  healthy and the space comes back once the file is removed;
* a process left behind: a daemonised ``sleep`` started with ``setsid nohup`` outlives its exec
  but not the sandbox: after ``delete`` no process of it remains on the host.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.manager import SandboxManager
from tests.sandbox.conftest import leftovers

pytestmark = pytest.mark.docker

PY_CONNECT = (
    "import socket,sys\n"
    "for h in sys.argv[2:]:\n"
    "    try:\n"
    "        socket.create_connection((h, int(sys.argv[1])), timeout=2); print('CONNECTED', h)\n"
    "    except OSError as e:\n"
    "        print('refused', h, e)\n"
)


@pytest.fixture(scope="module")
def manager(docker_image: str, tmp_path_factory: Any) -> Iterator[SandboxManager]:
    state = tempfile.mkdtemp(prefix="rr-", dir="/tmp")
    m = SandboxManager(
        name=f"esc2{uuid.uuid4().hex[:6]}",
        backend="docker",
        state_dir=state,
        db_url=f"sqlite:///{tmp_path_factory.mktemp('db')}/sb.db",
        default_spec=SandboxSpec(image=docker_image, memory_mb=256, pids_limit=64, workspace_mb=32),
        monitor_interval_s=0.2,
    )
    yield m
    m.close()
    shutil.rmtree(state, ignore_errors=True)
    assert leftovers(m) == []


def _host_addresses() -> list[str]:
    addrs = {"127.0.0.1", "172.17.0.1"}
    try:
        addrs.update(i[4][0] for i in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET))
    except OSError:
        pass
    return sorted(addrs)


def test_control_plane_port_is_unreachable(manager: SandboxManager) -> None:
    from rockroll.api.server.serve_proc import ServerProc, scratch_dir

    srv = ServerProc(scratch_dir("esc"), extra=["--pool-size", "0"])
    try:
        url = srv.start()
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            pass  # the host reaches its control plane
        sb = manager.create()
        r = sb.exec(["python3", "-c", PY_CONNECT, str(port), *_host_addresses()], timeout_s=30)
        assert "CONNECTED" not in r.stdout, r.stdout
        assert [line.split()[0] for line in r.stdout.splitlines()] == ["refused"] * len(_host_addresses())
        # nor can it reach the control plane's files (database, other sandboxes' sockets)
        # (the agent's uid cannot even list the server's socket folder, which holds its own socket only)
        r = sb.exec(f"ls /run/rockroll 2>&1; cat {srv.data_dir}/rockroll.db 2>&1 | head -c 100")
        assert "Permission denied" in r.stdout.splitlines()[0] and "SQLite" not in r.stdout, r.stdout
        assert "No such file" in r.stdout or "Permission denied" in r.stdout
        manager.delete(sb.id)
    finally:
        srv.cleanup()


def test_filling_the_workspace_stops_at_its_size(manager: SandboxManager) -> None:
    sb = manager.create()
    try:
        r = sb.exec("dd if=/dev/zero of=/workspace/big bs=1M count=200", timeout_s=60)
        assert r.exit_code != 0 and "No space left on device" in r.stderr, r
        size = int(sb.exec("stat -c %s /workspace/big").stdout)
        assert size <= 32 * 2**20
        assert sb.state == "ready" and sb.exec("echo alive").stdout == "alive\n"
        assert sb.health().sessions == 0  # the server itself survived the full disk
        assert sb.exec("rm /workspace/big && echo ok > /workspace/small && cat small").stdout == "ok\n"
    finally:
        manager.delete(sb.id)


def _host_pids(marker: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


def test_no_process_is_left_behind_after_delete(manager: SandboxManager) -> None:
    sb = manager.create()
    secs = str(90000 + os.getpid() % 9999)  # a unique command line to look for on the host
    # the exec's process group is killed when it ends: give setsid time to leave it first
    r = sb.exec(f"setsid nohup sleep {secs} >/dev/null 2>&1 < /dev/null & sleep 0.5; echo started", timeout_s=10)
    assert r.stdout.strip() == "started"
    listing = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"
    assert manager.wait_until(lambda: f"sleep {secs}" in sb.exec(listing).stdout, 10, 0.1)  # it outlived the exec
    assert manager.wait_until(lambda: _host_pids(f"sleep {secs}"), 5), "the daemon is not visible from the host"
    manager.delete(sb.id)
    deadline = time.monotonic() + 10
    while _host_pids(f"sleep {secs}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _host_pids(f"sleep {secs}") == [], "a sandbox process survived its delete"
    assert sb.id not in [h.sandbox_id for h in manager.backend.list_managed(manager.config.name)]
