"""Process sandboxes started by root are confined: attacks from inside one, and on its state directory.

Each test performs the attack through a real process sandbox (bwrap, the ``rockroll-sandbox`` user,
cgroups) and asserts the refusal. They need root, bubblewrap and the user (``scripts/setup.sh``
creates it, ``scripts/setup-docker.sh`` installs bubblewrap): they skip without them, and fail
instead where ``ROCKROLL_REQUIRE_DOCKER=1`` says the set-up ran (CI).
"""

from __future__ import annotations

import os
import pwd
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.confine import SANDBOX_USER, SERVER_UID_BASE, cgroup_dirs
from rockroll.sandbox.errors import SandboxStartError
from rockroll.sandbox.process import ProcessBackend
from tests.sandbox.conftest import confinement_problem

REQUIRED = os.environ.get("ROCKROLL_REQUIRE_DOCKER") == "1"


@pytest.fixture
def backend(tmp_path: Path) -> ProcessBackend:
    problem = confinement_problem()
    if problem:
        if REQUIRED:
            pytest.fail(f"process confinement cannot be tested: {problem}")
        pytest.skip(problem)
    return ProcessBackend(state_dir=str(tmp_path / "sb"), user=SANDBOX_USER)


@pytest.fixture
def two(backend: ProcessBackend) -> Iterator[tuple[ProcessBackend, Any, Any]]:
    spec = SandboxSpec(name="conf", memory_mb=128, pids_limit=48, cpus=1.0)
    manager = f"conf{uuid.uuid4().hex[:6]}"
    handles = [
        backend.start(f"sb{i}", spec, labels={"rockroll.manager": manager, "rockroll.sandbox": f"sb{i}"})
        for i in range(2)
    ]
    try:
        for h in handles:
            backend.wait_ready(h, 60)
        yield backend, handles[0], handles[1]
    finally:
        for h in handles:
            backend.stop(h)


def test_the_server_and_its_commands_run_as_the_unprivileged_user(two: Any) -> None:
    backend, a, b = two
    uid = pwd.getpwnam(SANDBOX_USER).pw_uid
    # each sandbox's server runs as a uid of its own (no per-uid limit shared), no host user's
    assert a.extra["user"] >= SERVER_UID_BASE and a.extra["user"] != b.extra["user"]
    assert a.extra["level"] == "confined"
    server = backend.exec(a, ["sh", "-c", "stat -c %u /run/rockroll/s.sock"])
    assert int(server.stdout) == a.extra["user"] != uid
    r = backend.exec(a, ["id", "-u"])
    assert r.exit_code == 0 and int(r.stdout) == a.extra["agent_uid"] not in (uid, 0)
    assert a.extra["agent_uid"] >= backend.agent_uid  # the sandbox's own base, above the backend's first
    caps = backend.exec(a, ["grep", "^Cap", "/proc/self/status"]).stdout
    assert all(line.split()[1] == "0000000000000000" for line in caps.splitlines()), caps  # no capability at all


def test_host_secrets_and_root_files_are_out_of_reach(two: Any) -> None:
    backend, a, _ = two
    assert backend.exec(a, ["cat", "/etc/shadow"]).exit_code != 0
    with tempfile.TemporaryDirectory(dir="/root") as secret_dir:  # root's home is hidden altogether
        Path(secret_dir, "token").write_text("secret")
        os.chmod(secret_dir, 0o755)
        os.chmod(Path(secret_dir, "token"), 0o644)
        r = backend.exec(a, ["cat", f"{secret_dir}/token"])
        assert r.exit_code != 0 and "secret" not in r.stdout
    with tempfile.TemporaryDirectory(dir="/var/tmp") as host_dir:
        os.chmod(host_dir, 0o777)
        r = backend.exec(a, ["sh", "-c", f"echo x > {host_dir}/planted"])
        assert r.exit_code != 0 and not os.path.exists(f"{host_dir}/planted")


def test_a_sandbox_cannot_see_another_sandboxs_directory(two: Any) -> None:
    backend, a, b = two
    backend.write_file(b, "mine.txt", b"b's data")
    b_dir = b.extra["dir"]
    for path in (f"{b_dir}/ws/mine.txt", f"{b_dir}/s.sock", os.path.dirname(b_dir)):
        r = backend.exec(a, ["ls", "-la", path])
        assert r.exit_code != 0, (path, r.stdout)
    r = backend.exec(a, ["sh", "-c", "ls -d /run/rockroll/s.sock; cat /run/rockroll/ws/mine.txt"])
    assert "s.sock" in r.stdout and "b's data" not in r.stdout  # its own directory only


def test_memory_and_pids_limits_hold(two: Any) -> None:
    backend, a, _ = two
    if not cgroup_dirs("probe") or not os.access(cgroup_dirs("probe")[0].parent.parent, os.W_OK):
        pytest.skip("the host's cgroup tree is not writable")
    hog = backend.exec(a, ["python3", "-c", "x = bytearray(400 * 1024 * 1024); print('allocated')"], timeout_s=30)
    assert hog.exit_code != 0 and "allocated" not in hog.stdout  # 400 MiB > the 128 MiB limit
    bomb = backend.exec(a, ["sh", "-c", "for i in $(seq 200); do sleep 3 & done; wait"], timeout_s=30)
    assert bomb.exit_code != 0 and "fork" in bomb.stderr.lower()  # 200 processes > the 48 pids limit
    assert backend.exec(a, ["true"]).exit_code == 0  # and the sandbox lives on


def test_stopping_removes_the_cgroups(backend: ProcessBackend) -> None:
    spec = SandboxSpec(name="conf")
    h = backend.start("sbx", spec, labels={"rockroll.manager": "cg", "rockroll.sandbox": "sbx"})
    backend.wait_ready(h, 60)
    made = [d for d in cgroup_dirs(h.extra["cgroup"]) if d.exists()]
    backend.stop(h)
    assert not any(d.exists() for d in made)


def test_state_directory_is_private_and_planted_ones_are_refused(tmp_path: Path, backend: ProcessBackend) -> None:
    spec = SandboxSpec(name="conf")
    h = backend.start("sb", spec, labels={"rockroll.manager": "pd", "rockroll.sandbox": "sb"})
    try:
        st = os.lstat(backend.state_dir)
        assert st.st_mode & 0o777 == 0o700 and st.st_uid == os.geteuid()
        assert os.stat(h.extra["dir"]).st_mode & 0o777 == 0o711  # agents pass through to their workspace
        backend.wait_ready(h, 60)
        assert os.stat(h.socket_path).st_mode & 0o777 == 0o600
        assert os.stat(f"{h.extra['dir']}/server.log").st_mode & 0o777 == 0o600
    finally:
        backend.stop(h)
    # a symlink planted where the state directory goes (a local user racing for /tmp/rockroll-sb-0)
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    planted = tmp_path / "planted"
    planted.symlink_to(target)
    with pytest.raises(SandboxStartError, match="not a plain directory"):
        ProcessBackend(state_dir=str(planted), user=SANDBOX_USER).start("x", spec, labels={"rockroll.manager": "pd"})
    assert target.stat().st_mode & 0o777 == 0o755 and not any(target.iterdir())  # nothing followed
    # a directory another user made there
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    os.chown(theirs, 12345, 12345)
    with pytest.raises(SandboxStartError, match="belongs to uid 12345"):
        ProcessBackend(state_dir=str(theirs), user=SANDBOX_USER).start("x", spec, labels={"rockroll.manager": "pd"})
