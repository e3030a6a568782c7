"""Escape attempts from a Docker sandbox: each must be contained and reported."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import SandboxPathError
from rockroll.sandbox.manager import SandboxManager
from tests.sandbox.conftest import leftovers

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def manager(docker_image: str, tmp_path_factory: Any) -> Iterator[SandboxManager]:
    state = tempfile.mkdtemp(prefix="rr-", dir="/tmp")
    m = SandboxManager(
        name=f"esc{uuid.uuid4().hex[:6]}",
        backend="docker",
        state_dir=state,
        db_url=f"sqlite:///{tmp_path_factory.mktemp('db')}/sb.db",
        default_spec=SandboxSpec(image=docker_image, memory_mb=128, pids_limit=64),
        monitor_interval_s=0.2,
    )
    yield m
    m.close()
    shutil.rmtree(state, ignore_errors=True)
    assert leftovers(m) == []


@pytest.fixture(scope="module")
def sb(manager: SandboxManager) -> Any:
    return manager.create()


PY_CONNECT = (
    "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3); print('CONNECTED')"
)


def _listener() -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("0.0.0.0", 0))
    srv.listen(8)
    threading.Thread(target=lambda: [srv.accept() for _ in range(8)], daemon=True).start()
    return srv, srv.getsockname()[1]


def test_no_network_egress(sb: Any) -> None:
    for host, port in (("1.1.1.1", "53"), ("8.8.8.8", "443")):
        r = sb.exec(["python3", "-c", PY_CONNECT, host, port], timeout_s=10)
        assert r.exit_code != 0 and "CONNECTED" not in r.stdout
        assert "unreachable" in r.stderr.lower()
    r = sb.exec(["python3", "-c", "import socket; socket.getaddrinfo('deb.debian.org', 80)"], timeout_s=10)
    assert r.exit_code != 0
    r = sb.exec(["python3", "-c", "import socket; print(sorted(i[1] for i in socket.if_nameindex()))"])
    assert r.stdout.strip() == "['lo']"


def test_host_loopback_and_bridge_are_unreachable(sb: Any) -> None:
    srv, port = _listener()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            pass  # the host can reach its own service
        for host in ("127.0.0.1", "172.17.0.1"):
            r = sb.exec(["python3", "-c", PY_CONNECT, host, str(port)], timeout_s=10)
            assert r.exit_code != 0 and "CONNECTED" not in r.stdout, host
    finally:
        srv.close()


def _pids_current(sb: Any) -> int:
    r = sb.exec("cat /sys/fs/cgroup/pids/pids.current 2>/dev/null || cat /sys/fs/cgroup/pids.current")
    return int(r.stdout)


def test_fork_bomb_stops_at_the_pids_limit(sb: Any, manager: SandboxManager) -> None:
    limit = sb.exec("cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max").stdout.strip()
    assert limit == "64"
    boot = sb.health().boot_id
    r = sb.exec("bomb() { bomb | bomb & }; bomb; sleep 1", timeout_s=30)
    # the agent's own bound (RLIMIT_NPROC, below the container's limit) stopped it: the server kept
    # the threads it answers with, so the monitor never saw it silent and nothing was replaced
    assert "Cannot fork" in r.stderr or "Resource temporarily unavailable" in r.stderr, r
    assert sb.health().boot_id == boot and sb.state == "ready"
    # the bomb's process group was killed with the command: the sandbox is usable again
    assert manager.wait_until(lambda: _pids_current(sb) < 16, timeout_s=30)
    assert sb.exec("echo alive").stdout == "alive\n"
    assert sb.health().sessions == 0


def test_memory_hog_is_killed_and_reported(sb: Any, manager: SandboxManager) -> None:
    boot = sb.health().boot_id
    r = sb.exec(["python3", "-c", "x = b'a' * (400 * 2**20); print('survived')"], timeout_s=60)
    assert r.oom_killed and r.exit_code == 137 and "survived" not in r.stdout
    # the OOM killer took the agent's process (oom_score_adj 1000), never the server
    assert sb.health().boot_id == boot and sb.state == "ready"
    assert sb.exec("echo alive").stdout == "alive\n"


SPAWN_HOGS = """
import subprocess, sys
hog = "import time; x = bytearray(8 * 2**20); time.sleep(3)"
procs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(30)]
print(sum(p.wait() == -9 for p in procs))
"""


def test_many_small_processes_past_the_memory_limit_fail_the_command_only(sb: Any) -> None:
    """No single hog: thirty processes of 8 MiB and more pass 128 MiB together; the server is not the one killed."""
    boot = sb.health().boot_id
    r = sb.exec(["python3", "-c", SPAWN_HOGS], timeout_s=60)
    assert r.oom_killed or int(r.stdout or 0) > 0, r  # the OOM killer took agent processes
    assert sb.health().boot_id == boot and sb.exec("echo alive").stdout == "alive\n"


def test_writes_outside_the_workspace_fail(sb: Any) -> None:
    for target in ("/etc/evil", "/usr/evil", "/evil", "/run/rockroll/evil2/../../evil"):
        r = sb.exec(["sh", "-c", f"echo x > {target}"])
        assert r.exit_code != 0, target
    assert sb.exec("echo ok > /workspace/fine && echo ok > /tmp/fine").ok
    with pytest.raises(SandboxPathError):
        sb.write_file("../etc/evil", "x")
    sb.exec("ln -sf /etc/passwd pw")
    with pytest.raises(SandboxPathError):
        sb.read_file("pw")


def test_host_files_are_not_visible(sb: Any) -> None:
    with tempfile.NamedTemporaryFile(prefix="rr-secret-", dir="/tmp") as secret:
        secret.write(b"host secret")
        secret.flush()
        name = Path(secret.name)
        r = sb.exec(f"cat {name}; ls /work /root/.ssh /var/run/docker.sock 2>&1; cat /proc/1/cmdline")
        assert "host secret" not in r.stdout
        assert "docker.sock" in r.stdout and "No such file" in r.stdout
        assert "dockerd" not in r.stdout and "init" in r.stdout  # pid 1 is the container's tini
