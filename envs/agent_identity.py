"""Acting as an agent's own unprivileged uid: the identity, its commands, its file access, its end.

Inside a sandbox, the in-sandbox server gives each env session (and the sandbox's ``exec`` calls)
an :class:`AgentIdentity`: a uid and gid of its own, distinct from the server's and never 0, and a
0700 home directory that identity owns. Env code that runs agent commands (SWE-v0's
:class:`~rockroll.envs.swe.executor.LocalExecutor`) asks :func:`current_agent` who the agent is and

* starts each command through :func:`argv_as` (``setpriv``: that uid and gid, no supplementary
  groups, empty inheritable, ambient and bounding capability sets, ``no_new_privs``), so the command
  holds no capability and cannot reach the server's uid or uid 0;
* touches the agent's files inside :func:`fs_as` (``setfsuid``/``setfsgid`` of the calling thread
  only), so a path the agent planted (a symlink, a FIFO) gives the caller nothing the agent lacks;
* ends it with :func:`kill_uid` (every process of that uid).

The server sets the identity for the duration of each session call (:func:`using_agent`); outside a
sandbox, or where the server cannot change uids, :func:`current_agent` is ``None`` and callers act
as themselves. This module lives in the env layer, standard library only, so env code can use it
without importing the sandbox layer.

Threat model: the identities' commands are untrusted. Changing uids needs ``CAP_SETUID`` and
``CAP_SETGID`` (and ``CAP_SETPCAP`` to empty the bounding set, ``CAP_KILL`` to signal), held by the
server only; :class:`AgentIdentity` refuses uid or gid 0.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = [
    "AgentIdentity", "current_agent", "using_agent", "argv_as", "fs_as", "kill_uid", "wipe", "SETPRIV", "PRLIMIT",
    "AGENT_OOM_SCORE_ADJ",
]  # fmt: skip

#: setpriv by absolute path: an agent's own PATH must never choose what runs with the server's capabilities
SETPRIV = next((p for p in ("/usr/bin/setpriv", "/bin/setpriv") if os.path.exists(p)), "/usr/bin/setpriv")
PRLIMIT = next((p for p in ("/usr/bin/prlimit", "/bin/prlimit") if os.path.exists(p)), "/usr/bin/prlimit")
#: the kernel's OOM killer picks an agent's process before the server's (1000: first whatever its size)
AGENT_OOM_SCORE_ADJ = 1000
_NOBODY = 0xFFFFFFFF  # (uid_t)-1: setfsuid(-1) changes nothing and answers the current value


@dataclass(frozen=True)
class AgentIdentity:
    """The uid and gid an agent's code runs as, and its home (a 0700 directory it owns)."""

    uid: int
    gid: int
    home: str
    #: RLIMIT_NPROC of each of its commands (its uid's processes and threads), below the sandbox's pids
    #: limit so a fork bomb leaves the server room (:mod:`rockroll.sandbox.server.agents`); None: no bound
    max_procs: int | None = None

    def __post_init__(self) -> None:
        if not (0 < self.uid < _NOBODY and 0 < self.gid < _NOBODY):
            raise ValueError(f"an agent identity needs a uid and gid other than 0, got {self.uid}:{self.gid}")


_PROVIDER: contextvars.ContextVar[Callable[[], AgentIdentity | None] | None] = contextvars.ContextVar(
    "rockroll_agent", default=None
)


def current_agent() -> AgentIdentity | None:
    """The identity agent code of the current call runs as, or ``None`` (act as this process)."""
    provider = _PROVIDER.get()
    return provider() if provider is not None else None


class using_agent:  # noqa: N801 - used like a function: ``with using_agent(provider):``
    """Make :func:`current_agent` call ``provider`` inside the block (lazily: an env that runs no
    command takes no uid). A plain class, not a generator: it wraps every env call of a session."""

    __slots__ = ("_provider", "_token")

    def __init__(self, provider: Callable[[], AgentIdentity | None] | None) -> None:
        self._provider = provider

    def __enter__(self) -> None:
        self._token = _PROVIDER.set(self._provider)

    def __exit__(self, *exc: object) -> None:
        _PROVIDER.reset(self._token)


def argv_as(identity: AgentIdentity | None, argv: list[str], cwd: str | None = None) -> list[str]:
    """``argv`` started as ``identity`` with no capabilities at all, in ``cwd`` when given (entered
    as the agent: start the returned command from a folder the caller can enter, e.g. ``/``);
    ``argv`` itself for ``None``.

    Each such command is also bounded: ``prlimit`` sets its ``RLIMIT_NPROC`` to the identity's
    ``max_procs`` (counted per uid, inherited through ``setpriv``), and it marks itself the OOM
    killer's first choice (``oom_score_adj`` :data:`AGENT_OOM_SCORE_ADJ`), so a fork bomb or a memory
    hog fails the command, never the sandbox's server.

    Do not start it inside :func:`fs_as`: a child forked with another file uid loses its ambient
    capabilities at ``execve`` and ``setpriv`` could not change uids.
    """
    if identity is None:
        return list(argv)
    oom = f"echo {AGENT_OOM_SCORE_ADJ} > /proc/self/oom_score_adj 2>/dev/null; "
    enter = ["/bin/sh", "-c", oom + ('cd -- "$0" && exec "$@"' if cwd else 'exec "$@"'), cwd or "sh"]
    limit = [PRLIMIT, f"--nproc={identity.max_procs}", "--"] if identity.max_procs else []
    return [
        *limit, SETPRIV, f"--reuid={identity.uid}", f"--regid={identity.gid}", "--clear-groups",
        "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", *enter, *argv,
    ]  # fmt: skip


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def fs_as(identity: AgentIdentity | None) -> Iterator[None]:
    """File access of the calling thread as ``identity`` (its fsuid/fsgid) inside the block.

    Only this thread changes (Linux credentials are per thread and glibc's ``setfsuid`` is the bare
    system call). Raises
    :class:`PermissionError` when this process cannot change them (no ``CAP_SETUID``/``CAP_SETGID``).
    """
    if identity is None:
        yield
        return
    libc = _libc()
    old_gid = libc.setfsgid(identity.gid)
    old_uid = libc.setfsuid(identity.uid)
    if libc.setfsuid(_NOBODY) != identity.uid or libc.setfsgid(_NOBODY) != identity.gid:
        libc.setfsuid(old_uid)
        libc.setfsgid(old_gid)
        raise PermissionError(f"cannot act as uid {identity.uid}: this process cannot change its file uid")
    try:
        yield
    finally:
        libc.setfsuid(old_uid)
        libc.setfsgid(old_gid)


def _pids_of(uid: int) -> list[int]:
    me, found = os.getpid(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if uid in (int(x) for x in line.split()[1:]):
                            found.append(int(entry.name))
                        break
        except (OSError, ValueError):
            continue
    return found


def kill_uid(uid: int, patience_s: float = 3.0) -> int:
    """SIGKILL every process of ``uid`` (again until none is left, at most ``patience_s``); the kills sent."""
    if uid <= 0 or uid == os.geteuid():
        raise ValueError(f"refusing to kill every process of uid {uid}")
    deadline, kills = time.monotonic() + patience_s, 0
    while time.monotonic() < deadline:
        pids = _pids_of(uid)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                kills += 1
        time.sleep(0.002)
    return kills


def wipe(path: str, identity: AgentIdentity | None, *, keep_top: bool = False) -> None:
    """Empty ``path`` (a directory of ``identity``'s, entries the agent made unwritable included) as
    that identity, then remove ``path`` itself as the caller (it owns the parent) unless ``keep_top``."""
    with fs_as(identity):
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)
        for top, dirs, _ in os.walk(path, onerror=lambda e: None):
            for d in dirs:
                full = os.path.join(top, d)
                if not os.path.islink(full):
                    with contextlib.suppress(OSError):
                        os.chmod(full, 0o700)
        with contextlib.suppress(OSError):
            for entry in os.scandir(path):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
    if not keep_top:
        with contextlib.suppress(OSError):
            os.rmdir(path)
