"""The process backend (namespaces where available), backend selection and config validation."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import BackendUnavailable
from rockroll.sandbox.isolation import detect_isolation
from rockroll.sandbox.manager import ManagerConfig, SandboxManager, make_backend
from rockroll.sandbox.pool import PoolConfig
from rockroll.sandbox.process import ProcessBackend

LABELS = {"rockroll.manager": "ptest", "rockroll.sandbox": "sb-p1"}


@pytest.fixture
def started(state_dir: str) -> Any:
    backend = ProcessBackend(state_dir=state_dir)
    handle = backend.start("sb-p1", SandboxSpec(), labels=LABELS)
    backend.wait_ready(handle, timeout_s=30)
    yield backend, handle
    backend.stop(handle)
    assert not backend.is_alive(handle) and backend.list_managed("ptest") == []


def test_process_sandbox_lifecycle(started: Any) -> None:
    backend, handle = started
    assert backend.is_alive(handle)
    assert [h.sandbox_id for h in backend.list_managed("ptest")] == ["sb-p1"]
    assert backend.health(handle).boot_id == handle.boot_id
    r = backend.exec(handle, "echo hi > f && cat f")
    assert r.stdout == "hi\n" and r.ok
    assert backend.write_file(handle, "g.txt", b"data") == 4 and backend.read_file(handle, "g.txt") == b"data"


@pytest.mark.skipif(detect_isolation() == "none", reason="no bwrap or unshare on this host")
def test_process_sandbox_has_no_network(started: Any) -> None:
    backend, handle = started
    code = "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)"
    r = backend.exec(handle, ["python3", "-c", code])
    assert r.exit_code != 0 and "unreachable" in r.stderr.lower()


@pytest.mark.skipif(detect_isolation() != "bwrap", reason="read-only host root needs bubblewrap")
def test_bwrap_sandbox_sees_the_host_read_only(started: Any) -> None:
    backend, handle = started
    with tempfile.TemporaryDirectory(dir="/var/tmp") as host_dir:
        os.chmod(host_dir, 0o777)  # writable by any uid: only the read-only mount may refuse the write
        for target in ("/etc/rr-evil", f"{host_dir}/evil"):
            r = backend.exec(handle, ["sh", "-c", f"echo x > {target}"])
            assert r.exit_code != 0 and "Read-only file system" in r.stderr and not os.path.exists(target)
    with tempfile.NamedTemporaryFile(dir="/tmp") as host_file:  # /tmp is private: only the sandbox's dir shows
        assert backend.exec(handle, ["cat", host_file.name]).exit_code != 0


def test_auto_backend_falls_back_to_processes(state_dir: str) -> None:
    cfg = ManagerConfig(backend="auto", docker_hosts=("unix:///nonexistent/docker.sock",), state_dir=state_dir)
    assert isinstance(make_backend(cfg), ProcessBackend)
    with pytest.raises(BackendUnavailable):
        make_backend(ManagerConfig(backend="docker", docker_hosts=("unix:///nonexistent/docker.sock",)))


@pytest.mark.parametrize(
    "bad",
    [
        lambda: ManagerConfig(backend="vm"),
        lambda: ManagerConfig(max_sandboxes=0),
        lambda: SandboxSpec(memory_mb=4),
        lambda: SandboxSpec(name="bad name!"),
        lambda: PoolConfig(min_idle=3, max_total=2),
        lambda: ProcessBackend(isolation="chroot"),
    ],
)
def test_invalid_config_raises_value_error(bad: Any) -> None:
    with pytest.raises(ValueError):
        bad()


def test_spec_round_trips_through_a_record(make_manager: Any) -> None:
    spec = SandboxSpec(name="custom", memory_mb=256, env=(("A", "1"),))
    assert SandboxSpec.from_dict(spec.to_dict()) == spec
    m: SandboxManager = make_manager()
    sb = m.create(spec)
    assert sb.exec("echo $A").stdout == "1\n" and sb.pool == "custom"


def test_a_socket_path_too_long_fails_with_a_message(tmp_path: Any) -> None:
    from rockroll.sandbox.errors import SandboxStartError

    deep = tmp_path / ("d" * 120)
    backend = ProcessBackend(state_dir=str(deep))
    with pytest.raises(SandboxStartError, match="shorter state directory"):
        backend.start("sb-p1", SandboxSpec(), labels=LABELS)
    assert backend.list_managed("ptest") == []
