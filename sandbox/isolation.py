"""How the process backend confines a sandbox's server: which isolation works on this host
(:func:`detect_isolation`) and the command that wraps the server in it (:func:`wrapper`), see
:mod:`rockroll.sandbox.process`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.confine import (
    SANDBOX_DIR,
    agent_pids,
    agent_uid_base,
    confined_argv,
    make_cgroups,
    memory_cgroup,
    server_uid,
)
from rockroll.sandbox.seccomp_filter import open_program

__all__ = ["Wrapper", "detect_isolation", "server_paths", "wrapper"]

_ISOLATION: str | None = None


def _works(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv + ["true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _bwrap_base() -> list[str]:
    return ["bwrap", "--unshare-all", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]


def server_paths(python: str, env: dict[str, str]) -> set[str]:
    """What the server reads from the host: the interpreter's prefixes, rockroll's sources and the
    PYTHONPATH entries (the spec's and the one passed on from this process)."""
    wanted = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.abspath(python)))}
    wanted.add(str(Path(__file__).resolve().parent.parent))
    for paths in (env.get("PYTHONPATH", ""), os.environ.get("PYTHONPATH", "")):
        wanted.update(p for p in paths.split(os.pathsep) if p)
    return wanted


def _reexpose(python: str, env: dict[str, str]) -> list[str]:
    """Read-only binds for the server's paths (:func:`server_paths`) that the /tmp and /run tmpfs
    would hide (a checkout under /tmp)."""
    out: list[str] = []
    for path in sorted(os.path.realpath(p) for p in server_paths(python, env)):
        if path.startswith(("/tmp/", "/run/")) and os.path.exists(path):
            out += ["--ro-bind", path, path]
    return out


def detect_isolation() -> str:
    """``bwrap``, ``unshare`` or ``none``: the strongest isolation that works here (cached)."""
    global _ISOLATION
    if _ISOLATION is None:
        if shutil.which("bwrap") and _works(_bwrap_base() + ["--"]):
            _ISOLATION = "bwrap"
        elif shutil.which("unshare") and _works(
            ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]
        ):
            _ISOLATION = "unshare"
        else:
            _ISOLATION = "none"
    return _ISOLATION


class Wrapper(NamedTuple):
    """A sandbox server's confinement: the argv before the server's command, the seccomp program's
    descriptor to pass on (None: none), the server's own environment variables, and what the
    sandbox handle's ``extra`` says of it."""

    argv: list[str]
    seccomp_fd: int | None
    env: dict[str, str]
    extra: dict[str, Any]


def wrapper(
    isolation: str, run_as: tuple[int, int] | None, python: str, agent_uid: int, d: Path, spec: SandboxSpec, cgroup: str
) -> Wrapper:
    """The confinement of the server of the sandbox in directory ``d`` (``run_as``: confined, the
    sandbox user's ``(uid, gid)`` found, as a server uid of the sandbox's own, in cgroup ``cgroup``; see
    the :mod:`rockroll.sandbox.process` docstring)."""
    extra: dict[str, Any] = {}  # what the sandbox handle's extra says of the confinement
    seccomp_fd: int | None = None  # the program bwrap loads (an inherited descriptor), where libseccomp is here
    own_env: dict[str, str] = {}  # the server's own variables (its commands do not inherit ROCKROLL_*)
    if run_as:
        uid = gid = server_uid()  # this sandbox's own: no per-uid limit shared with other sandboxes
        os.chown(d, uid, gid)
        os.chmod(d, 0o711)  # agents pass through to their workspaces; the socket and log are 0600
        agent_uid = agent_uid_base(agent_uid, spec.max_sessions)  # RLIMIT_NPROC counts host-wide
        os.chown(d / "ws", agent_uid, agent_uid)  # the exec calls' agent uid owns it
        own_env.update(ROCKROLL_AGENT_UID=str(agent_uid), ROCKROLL_SERVER_DIR=f"{SANDBOX_DIR}/srv")
        own_env["ROCKROLL_AGENT_PIDS"] = str(agent_pids(spec.pids_limit))  # the rest is the server's
        extra.update(agent_isolation="uid", agent_uid=agent_uid)
        procs = make_cgroups(cgroup, memory_mb=spec.memory_mb, pids=spec.pids_limit, cpus=spec.cpus)
        seccomp_fd = open_program()
        argv = confined_argv(
            [], sandbox_dir=str(d), user=(uid, gid), workspace_mb=spec.workspace_mb,
            cgroup_procs=procs, readable=server_paths(python, dict(spec.env)), seccomp_fd=seccomp_fd,
            pids_limit=spec.pids_limit, memory_mb=spec.memory_mb,
        )  # fmt: skip
        extra.update(user=uid, cgroup=cgroup)
        memory = memory_cgroup(cgroup) if procs else None
        if memory is not None:  # the server reads its OOM kill counter there (execs.oom_kill_count)
            own_env["ROCKROLL_MEMORY_CGROUP"] = str(memory)
    elif isolation == "bwrap":
        # /run holds host daemons' sockets (Docker's among them): hide it behind an empty tmpfs
        hide = ["--tmpfs", "/tmp", "--tmpfs", "/run"]
        seccomp_fd = open_program()
        argv = _bwrap_base() + hide + _reexpose(python, dict(spec.env))
        argv += ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
        argv += ["--bind", str(d), str(d), "--chdir", str(d / "ws"), "--"]
    elif isolation == "unshare":
        argv = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]
    else:
        argv = []
    return Wrapper(argv, seccomp_fd, own_env, extra)
