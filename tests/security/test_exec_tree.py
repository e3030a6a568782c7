"""Issue 13, the low items inside a sandbox: a killed command's whole tree goes; an OOM kill is reported.

Attacks, in a real sandbox of each backend (Docker, and a confined process sandbox: root, bwrap, the
``rockroll-sandbox`` user, cgroups): a command starts children that leave its process group
(``setsid``, a daemon's double fork, ``nohup setsid``) and runs past its timeout, so that they outlive
the kill and keep the sandbox's CPU, memory and pids (before the fix they did); a shell command
whose child the OOM killer kills came back with ``oom_killed`` false (and a process sandbox never
reported one, its server read the host's root cgroup). They skip without Docker or without root,
bubblewrap and the user, and fail instead where ``ROCKROLL_REQUIRE_DOCKER=1`` says the set-up ran.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.confine import SANDBOX_USER, cgroup_dirs
from rockroll.sandbox.process import ProcessBackend
from tests.sandbox.conftest import confinement_problem, docker_problem, skip_or_fail, state_dir  # noqa: F401

HOG = "x = bytearray(400 * 1024 * 1024); print('allocated')"  # 400 MiB, over the 128 MiB limit
#: the live ones of the pids given (a zombie waits for its reaper: it is dead)
ALIVE = (
    "import sys\n"
    "for pid in sys.argv[1:]:\n"
    "    try:\n"
    "        state = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0]\n"
    "    except OSError:\n"
    "        continue\n"
    "    if state not in 'ZX':\n"
    "        print(pid)\n"
)


@pytest.fixture(params=["docker", "process"])
def sandbox(request: Any, state_dir: str) -> Iterator[tuple[Any, Any]]:  # noqa: F811
    """``(backend, handle)`` of a fresh sandbox with 128 MiB and 64 pids."""
    spec = SandboxSpec(name="tree", memory_mb=128, pids_limit=64, cpus=1.0)
    if request.param == "docker":
        problem = docker_problem()
        if problem:
            skip_or_fail(f"no Docker daemon: {problem}")
        from rockroll.sandbox.docker_backend import DockerBackend
        from rockroll.sandbox.images import build_image

        backend: Any = DockerBackend(state_dir=state_dir)
        spec = spec.model_copy(update={"image": build_image()})
    else:
        problem = confinement_problem()
        if problem:
            skip_or_fail(f"process confinement: {problem}")
        backend = ProcessBackend(state_dir=state_dir, user=SANDBOX_USER)
    sid = f"tree{uuid.uuid4().hex[:6]}"
    handle = backend.start(sid, spec, labels={"rockroll.manager": f"m{sid}", "rockroll.sandbox": sid})
    try:
        backend.wait_ready(handle, 120)
        yield backend, handle
    finally:
        backend.stop(handle)


def _alive(backend: Any, handle: Any, pids: list[str]) -> list[str]:
    r = backend.exec(handle, ["python3", "-c", ALIVE, *pids], timeout_s=30)
    assert r.exit_code == 0, r
    return r.stdout.split()


# children that leave the command's process group three ways, their pids in a file
SPAWN = (
    "setsid sleep 600 & echo $! > pids; "
    "setsid sh -c 'sleep 600 & echo $! >> pids' & "  # a double fork: its parent exits at once
    "nohup setsid sleep 600 >/dev/null 2>&1 & echo $! >> pids; "
    "sleep 1; echo started"
)


@pytest.mark.slow
def test_a_killed_commands_children_that_left_its_group_die_with_it(sandbox: tuple[Any, Any]) -> None:
    backend, h = sandbox
    r = backend.exec(h, SPAWN + "; sleep 600", timeout_s=4)
    assert r.timed_out and r.stdout == "started\n", r
    pids = backend.read_file(h, "pids").decode().split()
    assert len(pids) == 3, pids
    assert _alive(backend, h, pids) == [], "children of a killed command outlived it"
    assert backend.exec(h, ["true"]).exit_code == 0  # the server lives on

    # the same command ending by itself keeps its setsid daemons (they may serve later calls):
    # the check above sees live children when there are some
    r = backend.exec(h, SPAWN, timeout_s=30)
    assert not r.timed_out and r.exit_code == 0, r
    left = _alive(backend, h, backend.read_file(h, "pids").decode().split())
    assert left, "a command that ended by itself lost its daemons"
    backend.exec(h, ["kill", "-9", *left])


def test_a_shell_command_killed_by_the_oom_killer_is_reported(sandbox: tuple[Any, Any]) -> None:
    backend, h = sandbox
    if isinstance(backend, ProcessBackend) and not any(d.is_dir() for d in cgroup_dirs(h.extra.get("cgroup", ""))):
        skip_or_fail("the host's cgroup tree is not writable: a process sandbox has no memory limit")
    for cmd in (
        ["python3", "-c", HOG],  # the command itself
        f'python3 -c "{HOG}"',  # through the shell
        f'cd . && python3 -c "{HOG}" && echo done',  # the shell waits for its child and exits 137
    ):
        r = backend.exec(h, cmd, timeout_s=60)
        assert r.exit_code == 137 and r.oom_killed and not r.timed_out, (cmd, r)
        assert "allocated" not in r.stdout and "done" not in r.stdout
    # a SIGKILL that is not the OOM killer's, and a shell that goes on after its child was killed
    r = backend.exec(h, "kill -9 $$", timeout_s=30)
    assert r.exit_code == 137 and not r.oom_killed, r
    r = backend.exec(h, f'python3 -c "{HOG}"; echo went-on', timeout_s=60)
    assert r.exit_code == 0 and r.stdout == "went-on\n" and not r.oom_killed, r
    assert backend.exec(h, ["true"]).exit_code == 0  # the sandbox lives on
