"""Confinement of process sandboxes started by root: a dedicated user, hidden host files, limits.

When the sandbox manager runs as root (a server, CI) and the host has bubblewrap, a process sandbox
does not run with root's rights (``ProcessBackend(user="")`` opts out). :func:`confined_argv` builds the command line that

1. joins a cgroup of the sandbox's own where the host's cgroup tree is writable (v2, or v1's
   ``memory``, ``pids`` and ``cpu`` controllers): ``memory_mb`` (swap included), ``pids_limit`` and
   ``cpus`` hold for the whole sandbox, as in Docker;
2. sets rlimits (``prlimit``): no core files, a file-size cap of ``workspace_mb``, 4,096 open files;
3. runs ``bwrap`` as root *without* a user namespace (new pid, net, ipc, uts and cgroup namespaces),
   the host's root filesystem read-only, private ``/tmp`` and ``/run``, ``/root`` and ``/home``
   hidden (only the interpreter and rockroll's sources are mounted back, read-only), and the
   sandbox's own directory bound at :data:`SANDBOX_DIR` (its socket and workspace; other
   sandboxes' directories are not in its view at all); bwrap loads the seccomp filter of
   :mod:`rockroll.sandbox.seccomp_filter` (``--seccomp``) last, so it holds for all that follows;
4. drops to an unprivileged uid of the sandbox's own (:func:`server_uid`; its gid alike; the
   presence of :data:`SANDBOX_USER` is what enables confinement) with ``setpriv`` (no supplementary
   groups, ``no_new_privs``) before the server starts, keeping as its only capabilities (bounding,
   inheritable and ambient sets) :data:`SERVER_CAPS`, which it needs to run each agent command as an
   agent uid of :data:`AGENT_UID_BASE`'s range (:mod:`rockroll.sandbox.server.agents`); those
   commands hold no capability at all. ``server_caps=False`` drops every capability instead.

Threat model: the server and everything it runs (env code, the agent's commands) are untrusted
towards the host. The server and env code run as the sandbox's own server uid, which owns nothing on
the host but its sandbox directory and shares no per-uid limit with another sandbox; agent commands run as agent uids (no capabilities,
``no_new_privs``) that own only their workspace. None of them can read ``/etc/shadow``, root's
files or another sandbox's directory, write the host's files, or reach a network; the agent uids
cannot write the server's socket or files, nor read another session's workspace. Stopping the
sandbox kills every process of its cgroups (:func:`kill_cgroup`) and its pid namespace. The user is
created by ``scripts/setup.sh`` (``useradd --system``); without it, or without root or
bubblewrap, sandboxes run as the manager's user (see :mod:`rockroll.sandbox.process`).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shlex
from pathlib import Path

from rockroll.sandbox.errors import SandboxStartError

__all__ = [
    "AGENT_UID_BASE",
    "SERVER_CAPS",
    "SANDBOX_USER",
    "SANDBOX_DIR",
    "LINK_DIR",
    "LINK_SUBDIR",
    "sandbox_user",
    "agent_pids",
    "agent_uid_base",
    "server_uid",
    "SERVER_UID_BASE",
    "kill_cgroup",
    "confined_argv",
    "make_cgroups",
    "memory_cgroup",
    "remove_cgroups",
    "cgroup_dirs",
]

#: the unprivileged user process sandboxes run as when the manager is root
SANDBOX_USER = "rockroll-sandbox"
#: where a confined sandbox sees its own directory (socket ``s.sock``, workspace ``ws``)
SANDBOX_DIR = "/run/rockroll"
#: where a sandbox sees its model link's folder (:mod:`rockroll.sandbox.model_link`): the ``link`` folder of its
#: own directory, bound apart so that agent uids reach it (0755) while the server's folder stays 0700
LINK_DIR = "/run/rockroll-link"
LINK_SUBDIR = "link"
#: the first agent uid of a confined sandbox (its ``exec`` calls; session ``n`` gets base + n): a
#: range no host user has, shared by every sandbox (each sees only its own files and processes)
AGENT_UID_BASE = 1_800_000_000
#: what the server keeps to start agent commands as agent uids (and to kill them, own their folders)
SERVER_CAPS = ("setuid", "setgid", "setpcap", "kill", "chown")
#: per-sandbox agent uid bases are drawn from this many slots above the backend's first uid
_UID_SLOTS = 1 << 17
#: the first uid of confined sandbox *servers*: each sandbox's server runs as a uid of its own drawn from
#: :data:`_SERVER_SLOTS` above it (below the agents' range), so no per-uid limit is shared between sandboxes
SERVER_UID_BASE = 1_700_000_000
_SERVER_SLOTS = 1 << 20


def agent_pids(pids_limit: int) -> int:
    """The processes (threads included) one agent uid may hold in a sandbox of ``pids_limit``: the
    rest, a quarter of the limit (8 to 32), is the server's, for the threads it answers calls with."""
    return pids_limit - min(32, max(8, pids_limit // 4))


def agent_uid_base(first: int, max_sessions: int) -> int:
    """A random first agent uid for one sandbox, ``first`` plus a multiple of ``max_sessions + 1``.

    The kernel counts a uid's processes (``RLIMIT_NPROC``) over the whole host, so sandboxes that
    shared agent uids would share their bound; two of ``2**17`` slots colliding only means that.
    """
    return first + secrets.randbelow(_UID_SLOTS) * (max_sessions + 1)


def server_uid() -> int:
    """A random uid (and gid) for one confined sandbox's server, a uid no host user has.

    The kernel counts ``RLIMIT_NPROC`` per uid over the whole host, and a uid may signal its own
    processes anywhere: servers of different sandboxes (different owners) sharing one uid would share
    that bound and could reach each other's processes. Two of ``2**20`` drawn alike only means that.
    """
    return SERVER_UID_BASE + secrets.randbelow(_SERVER_SLOTS)


_HIDDEN = ("/tmp", "/run", "/root", "/home")
_CGROUP_ROOT = Path("/sys/fs/cgroup")


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Make ``path`` a directory only this process's user can enter (0700), refusing a planted one.

    The sandboxes' state directory holds every sandbox's socket: a symlink put in its place (say in
    ``/tmp``) or a folder another user made there would let that user read sockets or redirect the
    manager's writes. Such a path raises :class:`~rockroll.sandbox.errors.SandboxStartError`; nothing
    is followed or changed.
    """
    p = Path(os.path.abspath(path))
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        p.mkdir(mode=0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        raise SandboxStartError(
            f"sandbox state directory {p} is not a plain directory ({e.strerror}): remove it"
        ) from e
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise SandboxStartError(
                f"sandbox state directory {p} belongs to uid {st.st_uid}, not to this user ({os.geteuid()}): "
                "remove it or choose another state directory"
            )
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return p


def sandbox_user(name: str = SANDBOX_USER) -> tuple[int, int] | None:
    """``(uid, gid)`` of ``name`` when this process is root and the user exists, else ``None``."""
    if not name or os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return (entry.pw_uid, entry.pw_gid) if entry.pw_uid != 0 else None


def _mount_back(paths: set[str]) -> list[str]:
    """Read-only binds of ``paths`` that a hidden tree covers, each parent made searchable (0755)."""
    out: list[str] = []
    made: set[str] = set()
    for path in sorted(os.path.realpath(p) for p in paths):
        top = next((h for h in _HIDDEN if path.startswith(h + "/")), None)
        if top is None or not os.path.exists(path):
            continue
        parts = Path(path).relative_to(top).parts[:-1]
        for i in range(len(parts)):
            parent = os.path.join(top, *parts[: i + 1])
            if parent not in made:
                made.add(parent)
                out += ["--perms", "0755", "--dir", parent]
        out += ["--ro-bind", path, path]
    return out


def cgroup_dirs(name: str) -> list[Path]:
    """The cgroup folders of sandbox ``name``: one on a v2 host, one per controller on v1."""
    if (_CGROUP_ROOT / "cgroup.controllers").exists():
        return [_CGROUP_ROOT / "rockroll" / name]
    return [
        _CGROUP_ROOT / ctl / "rockroll" / name for ctl in ("memory", "pids", "cpu") if (_CGROUP_ROOT / ctl).is_dir()
    ]


def memory_cgroup(name: str) -> Path | None:
    """Sandbox ``name``'s cgroup folder with the memory controller (its OOM kill counter), if it exists."""
    for d in cgroup_dirs(name):
        if (d.parent.parent == _CGROUP_ROOT or d.parent.parent.name == "memory") and d.is_dir():
            return d
    return None


def make_cgroups(name: str, *, memory_mb: int, pids: int, cpus: float) -> list[str]:
    """Create sandbox ``name``'s cgroups with its limits; the ``cgroup.procs`` files to join.

    Where the tree is not writable (no root, a read-only mount) nothing is made and ``[]`` comes back:
    limits are then the rlimits alone.
    """
    mem, period = memory_mb * 1024 * 1024, 100_000
    v2 = {"memory.max": mem, "memory.swap.max": 0, "pids.max": pids, "cpu.max": f"{int(cpus * period)} {period}"}
    v1 = {
        "memory.limit_in_bytes": mem,
        "memory.memsw.limit_in_bytes": mem,
        "pids.max": pids,
        "cpu.cfs_period_us": period,
        "cpu.cfs_quota_us": int(cpus * period),
    }
    procs = []
    for d in cgroup_dirs(name):
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if d.parent.name == "rockroll" and d.parent.parent == _CGROUP_ROOT:  # v2: enable the controllers below
            for parent in (_CGROUP_ROOT, d.parent):
                try:
                    (parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
                except OSError:
                    pass
        for key, value in (v2 if d.parent.parent == _CGROUP_ROOT else v1).items():
            try:
                (d / key).write_text(str(value))
            except OSError:  # a knob this kernel lacks (memsw without swap accounting): the rest holds
                continue
        procs.append(str(d / "cgroup.procs"))
    return procs


def kill_cgroup(name: str) -> int:
    """SIGKILL every process in sandbox ``name``'s cgroups (what ``setsid`` and an empty environment do not
    escape); how many were signalled."""
    killed = 0
    for d in cgroup_dirs(name):
        try:
            pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            continue
        for pid in pids:
            try:
                os.kill(pid, 9)
                killed += 1
            except (ProcessLookupError, PermissionError):
                continue
    return killed


def remove_cgroups(name: str) -> None:
    """Remove sandbox ``name``'s cgroups (after its processes are gone; a busy one is left)."""
    for d in cgroup_dirs(name):
        try:
            d.rmdir()
        except OSError:
            continue


def confined_argv(
    server: list[str],
    *,
    sandbox_dir: str,
    user: tuple[int, int],
    workspace_mb: int,
    cgroup_procs: list[str],
    readable: set[str],
    seccomp_fd: int | None = None,
    server_caps: bool = True,
    pids_limit: int | None = None,
    memory_mb: int | None = None,
) -> list[str]:
    """The command line that runs ``server`` confined (module docstring); ``server`` names
    :data:`SANDBOX_DIR` paths. ``readable`` are host paths mounted back read-only (interpreter, sources);
    ``seccomp_fd`` an inherited descriptor holding the BPF program bwrap loads
    (:mod:`rockroll.sandbox.seccomp_filter`), or None: no filter. ``pids_limit`` and ``memory_mb`` are
    also set as rlimits, the fallback where no cgroup holds them: ``RLIMIT_NPROC`` (per uid, and the
    server's uid is the sandbox's own) always, ``RLIMIT_AS`` (``memory_mb`` + 1 GiB) per process when
    ``cgroup_procs`` is empty."""
    uid, gid = user
    join = "".join(f"echo $$ > {shlex.quote(p)} && " for p in cgroup_procs)
    limits = ["prlimit", "--core=0", "--nofile=4096", f"--fsize={workspace_mb * 1024 * 1024}"]
    limits += [f"--nproc={pids_limit}"] if pids_limit else []
    # address space, not memory: 1 GiB of room for what a process maps and never touches (thread stacks)
    limits += [f"--as={(memory_mb + 1024) * 1024 * 1024}"] if memory_mb and not cgroup_procs else []
    limits += ["--"]
    bwrap = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    bwrap += ["--cap-drop", "ALL"]
    for cap in SERVER_CAPS if server_caps else ("setuid", "setgid", "setpcap"):  # setpriv's, then the server's
        bwrap += ["--cap-add", f"CAP_{cap.upper()}"]
    bwrap += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for hidden in _HIDDEN:  # /tmp stays writable for all (sticky), as on any host
        bwrap += (["--perms", "1777"] if hidden == "/tmp" else []) + ["--tmpfs", hidden]
    bwrap += _mount_back(readable)
    bwrap += ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    bwrap += ["--bind", sandbox_dir, SANDBOX_DIR]
    bwrap += ["--ro-bind", os.path.join(sandbox_dir, LINK_SUBDIR), LINK_DIR, "--chdir", "/", "--"]
    keep = "".join(f",+{c}" for c in SERVER_CAPS) if server_caps else ""
    drop = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", f"--inh-caps=-all{keep}"]
    drop += [f"--ambient-caps=-all{keep}"] if keep else []
    drop += [f"--bounding-set=-all{keep}", "--no-new-privs", "--"]
    return ["/bin/sh", "-c", join + 'exec "$@"', "sandbox"] + limits + bwrap + drop + server
