"""Issue 13, item 6: the Docker backend's socket folders are private to the server, one per sandbox.

Attacks by another local user of the host: before the fix the socket folder was world-writable, so
they could fill the disk there or plant a symlinked ``s.sock`` for the server to talk to (a confused
deputy); they plant a symlink where the state folder goes (to redirect the server's writes), or make
that folder themselves beforehand. Real Docker daemon and ``rockroll-sandbox:latest``; skipped without
them unless ``ROCKROLL_REQUIRE_DOCKER=1``. (The process backend's folders: test_process_confinement.py.)
"""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path

import pytest

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import SandboxStartError
from tests.sandbox.conftest import docker_problem, state_dir  # noqa: F401

pytestmark = pytest.mark.docker


def _backend(path: Path):  # noqa: ANN202 - a DockerBackend, imported lazily
    problem = docker_problem()
    if problem:
        if os.environ.get("ROCKROLL_REQUIRE_DOCKER") == "1":
            pytest.fail(f"ROCKROLL_REQUIRE_DOCKER=1 but Docker is unusable: {problem}")
        pytest.skip(f"no Docker daemon: {problem}")
    from rockroll.sandbox.docker_backend import DockerBackend

    return DockerBackend(state_dir=str(path))


def _labels(manager: str, sandbox_id: str) -> dict[str, str]:
    return {"rockroll.managed": "1", "rockroll.manager": manager, "rockroll.sandbox": sandbox_id}


def _containers(manager: str) -> list[str]:
    import docker

    return [
        c.name for c in docker.from_env().containers.list(all=True, filters={"label": f"rockroll.manager={manager}"})
    ]


def test_socket_folders_are_private_and_one_per_sandbox(state_dir: str) -> None:  # noqa: F811
    from rockroll.sandbox.images import build_image

    root = Path(state_dir) / "sb"
    backend = _backend(root)
    spec = SandboxSpec(image=build_image(), memory_mb=128)
    manager = f"sd{uuid.uuid4().hex[:6]}"
    handles = [backend.start(f"sb{i}", spec, labels=_labels(manager, f"sb{i}")) for i in range(2)]
    try:
        for h in handles:
            backend.wait_ready(h, 120)
        st = os.lstat(root)  # 0700 above every socket: no other local user enters it
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
        dirs = [Path(h.extra["dir"]) for h in handles]
        assert len(set(dirs)) == 2  # one folder per sandbox
        for d, h in zip(dirs, handles, strict=True):
            assert d.is_relative_to(root) and not d.is_symlink() and Path(h.socket_path).parent == d
            assert stat.S_ISSOCK(os.lstat(h.socket_path).st_mode)  # the server's own socket, no link
            if os.geteuid() == 0:  # the container's root (its server) alone enters it: agent uids do not
                assert os.stat(d).st_uid == 0 and stat.S_IMODE(os.stat(d).st_mode) == 0o700
                assert stat.S_IMODE(os.lstat(h.socket_path).st_mode) == 0o600
    finally:
        for h in handles:
            backend.stop(h)
    assert _containers(manager) == []


def test_a_planted_state_folder_is_refused_and_nothing_is_followed(tmp_path: Path) -> None:
    spec = SandboxSpec(memory_mb=128)
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    planted = tmp_path / "planted"
    planted.symlink_to(target)
    manager = f"sd{uuid.uuid4().hex[:6]}"
    with pytest.raises(SandboxStartError, match="not a plain directory"):
        _backend(planted).start("x", spec, labels=_labels(manager, "x"))
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 and not any(target.iterdir())  # nothing followed
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    os.chmod(theirs, 0o777)
    if os.geteuid() == 0:
        os.chown(theirs, 12345, 12345)
        with pytest.raises(SandboxStartError, match="belongs to uid 12345"):
            _backend(theirs).start("y", spec, labels=_labels(manager, "y"))
        assert not any(theirs.iterdir())
    assert _containers(manager) == []
