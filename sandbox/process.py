"""The process backend: the in-sandbox server as a child process, in new namespaces where possible.

This is the embedded default when no Docker daemon is reachable. Isolation is chosen once, from
what works on the host (probed by running ``true``):

1. ``bwrap`` (bubblewrap): new user, pid, net, ipc, uts and cgroup namespaces, all capabilities
   dropped, the host's root filesystem mounted **read-only**, a private ``/tmp``, and only the
   sandbox's own directory (socket + workspace) writable. No network (a fresh net namespace has
   only a loopback of its own); the host reaches the server through the unix socket file. A seccomp
   filter (:mod:`rockroll.sandbox.seccomp_filter`: no ptrace, new namespaces, mounts, kernel
   keyrings, BPF, io_uring...) holds where libseccomp is installed; ``extra["seccomp"]`` says so.
2. ``unshare --net --pid --fork --mount-proc --kill-child``: no network and a private pid space,
   but the host filesystem stays **writable** with the server's rights.
3. nothing: a plain child process (``isolation == "none"``).

When the manager runs as root and the user ``rockroll-sandbox`` exists (``scripts/setup.sh`` creates
it), bwrap sandboxes are *confined* (:mod:`rockroll.sandbox.confine`): the server runs as that
unprivileged user, sees only its own directory (at ``/run/rockroll``) of the state directory, not
``/root`` or ``/home``, and runs under cgroup limits (memory, pids, CPU, where the host's cgroup
tree is writable) and rlimits. The handle's ``extra["user"]`` says which uid a sandbox runs as.
Confined, agent commands run as uids of their own (``agent_uid`` and up, see
:mod:`rockroll.sandbox.server.agents`; ``extra["agent_isolation"] == "uid"``): the sandbox's
directory is 0711 and its socket and log 0600, so they cannot reach or replace the socket, and
each session's workspace is a 0700 folder of its own uid. Unconfined, they run as the server
(``"none"``).

Threat model and limits, said plainly: this backend is for trusted or semi-trusted code and for
machines without Docker. Host files outside the hidden trees stay *visible* (read-only under
bwrap). Unconfined (not root, or no bwrap) there are **no CPU, memory or pids limits** and the
server runs with the manager's rights, so a fork bomb or memory hog affects the host. Use the
Docker backend for untrusted agent code.

With ``tie_to_parent`` (a node agent's backend, :mod:`rockroll.sandbox.node.host`) a sandbox lives
only as long as the process that started it, even when that one is SIGKILLed: the child gets
``PR_SET_PDEATHSIG`` (from one long-lived spawner thread, since the kernel ties that signal to the
creating *thread*), bwrap gets ``--die-with-parent`` and ``unshare`` has ``--kill-child``.

Every sandbox also ends with the process that started it, however that one ends (SIGKILL
included), unless it was handed over: the server watches a *lifeline*, a pipe whose only write end
this process holds (close-on-exec, so no other child inherits it), and exits when it closes.
:meth:`ProcessBackend.release` (called by a manager closed with ``stop_sandboxes=False``) writes
``k`` first, and the server then outlives this process for the next manager to adopt, within
``adopt_timeout_s`` (ten minutes by default); else it stops by itself (:mod:`rockroll.sandbox.handover`).

Processes carry ``--label rockroll.manager=<name> --label rockroll.sandbox=<id>`` on their command
line, so a restarted manager finds them in ``/proc`` and adopts or stops them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from rockroll.sandbox.backends import BackendConfig
from rockroll.sandbox.base import SandboxBackend, SandboxHandle, SandboxSpec
from rockroll.sandbox.confine import (
    AGENT_UID_BASE,
    SANDBOX_DIR,
    SANDBOX_USER,
    cgroup_dirs,
    kill_cgroup,
    private_dir,
    remove_cgroups,
    sandbox_user,
)
from rockroll.sandbox.confinement import check, inherited_minimum
from rockroll.sandbox.errors import SandboxStartError
from rockroll.sandbox.isolation import detect_isolation, wrapper
from rockroll.sandbox.model_link import make_link_dir
from rockroll.sandbox.retry import Backoff
from rockroll.sandbox.seccomp_filter import status
from rockroll.sandbox.server.handover import ADOPT_TIMEOUT_S

#: bytes of a Unix socket path (``sun_path`` is 108 bytes with its trailing NUL on Linux)
MAX_SOCKET_PATH = 107

__all__ = ["ProcessBackend", "ProcessConfig", "DEFAULT_STATE_DIR"]

DEFAULT_STATE_DIR = f"/tmp/rockroll-sb-{os.getuid()}"
_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "PYTHONPATH", "VIRTUAL_ENV")
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
#: pid of a sandbox started here -> the write end of its lifeline (see ProcessBackend.release)
_LIFELINES: dict[int, int] = {}


class ProcessBackend(SandboxBackend):
    """Sandboxes as local processes (see the module docstring).

    Args:
        state_dir: where each sandbox gets ``<manager>/<id>/`` with its socket, workspace and log.
        isolation: ``auto`` (strongest available), ``bwrap``, ``unshare`` or ``none``.
        python: interpreter that runs the server (default: this one).
        user: the unprivileged user a root manager's bwrap sandboxes run as, confined (``rockroll-sandbox``,
            :data:`~rockroll.sandbox.confine.SANDBOX_USER`, the default); '': unconfined, as the manager's user.
        agent_uid: the first agent uid of a confined sandbox (its ``exec`` calls; session ``n`` gets
            ``agent_uid + n``): a range no host user has.
        tie_to_parent: sandboxes die with this process (see the module docstring); off, they outlive
            it for a restarted manager to adopt.
        survive_owner: no lifeline: a sandbox outlives this process however it ends (SIGKILL included),
            for a later manager to adopt; off (the default), only a sandbox handed over with
            :meth:`release` does, so a crashed owner leaves no sandbox behind.
        adopt_timeout_s: a sandbox handed over with :meth:`release` that no manager adopts this long
            stops by itself (:mod:`rockroll.sandbox.handover`); 0: it waits forever.
        min_isolation: the weakest isolation level this backend may start a sandbox with
            (:mod:`rockroll.sandbox.confinement`; ``strongest``: what this machine offers); None: the one a
            control plane gave this process (a job worker), else none (a local run: a weak level is warned of).
            Below it, construction and :meth:`start` raise :class:`~rockroll.sandbox.confinement.IsolationTooWeak`.
    """

    name = "process"

    def __init__(
        self,
        state_dir: str = DEFAULT_STATE_DIR,
        isolation: str = "auto",
        python: str = sys.executable,
        user: str = SANDBOX_USER,
        agent_uid: int = AGENT_UID_BASE,
        tie_to_parent: bool = False,
        survive_owner: bool = False,
        adopt_timeout_s: float = ADOPT_TIMEOUT_S,
        min_isolation: str | None = None,
    ):
        if isolation not in ("auto", "bwrap", "unshare", "none"):
            raise ValueError(f"isolation must be auto, bwrap, unshare or none, got {isolation!r}")
        self.state_dir = Path(state_dir)
        self.isolation = detect_isolation() if isolation == "auto" else isolation
        self.python = python
        #: ``(uid, gid)`` sandboxes run as (confined), or None: as this process's user
        self.run_as = sandbox_user(user) if self.isolation == "bwrap" else None
        self.agent_uid = agent_uid
        self.tie_to_parent = tie_to_parent
        self.survive_owner = survive_owner and not tie_to_parent
        if adopt_timeout_s < 0:
            raise ValueError(f"adopt_timeout_s must be >= 0 (0: wait forever), got {adopt_timeout_s}")
        self.adopt_timeout_s = adopt_timeout_s
        #: the isolation level its sandboxes get (:mod:`rockroll.sandbox.confinement`)
        self.level = "confined" if self.run_as else self.isolation
        self.min_isolation = inherited_minimum() if min_isolation is None else min_isolation
        check(self.level, self.min_isolation, what="process sandbox")

    def _dir(self, manager: str, name: str) -> Path:
        return self.state_dir / manager / name

    def start(self, sandbox_id: str, spec: SandboxSpec, *, labels: dict[str, str]) -> SandboxHandle:
        check(self.level, self.min_isolation or "none", what="process sandbox")
        manager = labels.get("rockroll.manager", "default")
        d = self._dir(manager, f"{sandbox_id}-g{labels.get('rockroll.generation', '0')}")
        private_dir(self.state_dir)  # 0700, ours, not a symlink: other local users reach no socket
        shutil.rmtree(d, ignore_errors=True)
        (d / "ws").mkdir(parents=True, mode=0o700)
        make_link_dir(d)
        os.chmod(d, 0o700)
        sock = str(d / "s.sock")
        if len(os.fsencode(sock)) > MAX_SOCKET_PATH:
            raise SandboxStartError(
                f"sandbox socket path {sock!r} is {len(os.fsencode(sock))} bytes, over the {MAX_SOCKET_PATH} a Unix "
                "socket address holds: use a shorter state directory (data dir)",
                sandbox_id=sandbox_id,
            )
        inner = SANDBOX_DIR if self.run_as else str(d)  # the sandbox's own view of its directory
        server = [self.python, "-m", "rockroll.sandbox.server", "--socket", f"{inner}/s.sock"]
        server += ["--workspace", f"{inner}/ws", "--max-sessions", str(spec.max_sessions)]
        for k, v in sorted(labels.items()):
            server += ["--label", f"{k}={v}"]
        cgroup = f"{manager}.{d.name}"
        extra = {"isolation": self.isolation, "level": self.level, "dir": str(d), "user": os.geteuid()}
        extra["agent_isolation"] = "none"
        extra["seccomp"] = status() if self.isolation == "bwrap" else "off: no bwrap to load it"
        w = wrapper(self.isolation, self.run_as, self.python, self.agent_uid, d, spec, cgroup)
        argv, seccomp_fd, own_env = w.argv, w.seccomp_fd, w.env
        extra.update(w.extra)
        # a minimal environment: the host's variables (tokens, keys...) do not enter the sandbox
        env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
        env.update({"HOME": f"{inner}/ws", "PYTHONDONTWRITEBYTECODE": "1", **dict(spec.env), **own_env})
        if self.tie_to_parent and "bwrap" in argv:
            argv.insert(argv.index("bwrap") + 1, "--die-with-parent")
        lifeline, keep = os.pipe2(os.O_CLOEXEC)  # the server ends when `keep` closes (see release)
        if not self.survive_owner:
            server += ["--lifeline", str(lifeline), "--adopt-timeout-s", str(self.adopt_timeout_s)]
            server += ["--private-pids"] if self.isolation != "none" else []  # bwrap, unshare: a pid namespace
        fds = (lifeline,) if seccomp_fd is None else (lifeline, seccomp_fd)
        try:
            with open(d / "server.log", "wb") as log:
                os.fchmod(log.fileno(), 0o600)

                def spawn() -> subprocess.Popen[bytes]:
                    return subprocess.Popen(
                        argv + server, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                        start_new_session=True, env=env, cwd=str(d),
                        pass_fds=fds,
                        preexec_fn=_die_with(os.getpid()) if self.tie_to_parent else None,
                    )  # fmt: skip

                proc = _SPAWNER.submit(spawn).result() if self.tie_to_parent else spawn()
        except OSError as e:
            os.close(keep)
            raise SandboxStartError(f"cannot start sandbox process: {e}", sandbox_id=sandbox_id) from e
        finally:
            os.close(lifeline)
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        _CHILDREN[proc.pid] = proc
        if self.survive_owner:
            os.close(keep)
        else:
            _LIFELINES[proc.pid] = keep
        return SandboxHandle(
            sandbox_id=sandbox_id,
            backend=self.name,
            socket_path=sock,
            ref=str(proc.pid),
            extra=extra,
        )

    def release(self, handle: SandboxHandle) -> None:
        """Leave the sandbox running after this process ends, for a later manager to adopt: its lifeline
        says so (``k``) before it closes. Without this, a sandbox ends with the process that started it."""
        keep = _LIFELINES.pop(int(handle.ref), None)
        if keep is not None:
            with contextlib.suppress(OSError):  # the server is gone already
                os.write(keep, b"k")
            os.close(keep)

    def stop(self, handle: SandboxHandle) -> None:
        pid = int(handle.ref)
        keep = _LIFELINES.pop(pid, None)
        if keep is not None:
            os.close(keep)
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc = _CHILDREN.pop(pid, None)
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        d = handle.extra.get("dir") or os.path.dirname(handle.socket_path)
        if d and str(self.state_dir) in d:
            shutil.rmtree(d, ignore_errors=True)
        if handle.extra.get("cgroup"):
            for _ in Backoff(timeout_s=5.0):  # the pid namespace's last processes take a moment to go
                kill_cgroup(handle.extra["cgroup"])  # whatever left the tree (setsid) is still in the cgroup
                remove_cgroups(handle.extra["cgroup"])
                if not _cgroup_left(handle.extra["cgroup"]):
                    break

    def is_alive(self, handle: SandboxHandle) -> bool:
        pid = int(handle.ref)
        proc = _CHILDREN.get(pid)
        if proc is not None:
            return proc.poll() is None
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X") and f"rockroll.sandbox={handle.sandbox_id}".encode() in cmdline

    def exit_reason(self, handle: SandboxHandle) -> str:
        proc = _CHILDREN.get(int(handle.ref))
        if proc is not None and proc.returncode is not None:
            code = proc.returncode
            return f"killed by signal {-code}" if code < 0 else f"exit {code}"
        return "process gone"

    def logs(self, handle: SandboxHandle, tail: int = 50) -> str:
        try:
            lines = (Path(os.path.dirname(handle.socket_path)) / "server.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-tail:])

    def list_managed(self, manager: str) -> list[SandboxHandle]:
        """Outermost processes whose command line carries ``rockroll.manager=<manager>``."""
        marker = f"rockroll.manager={manager}".encode()
        found: dict[int, tuple[int, list[str]]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                raw = (entry / "cmdline").read_bytes()
                if marker not in raw or b"rockroll.sandbox.server" not in raw:
                    continue
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            found[int(entry.name)] = (ppid, raw.decode(errors="replace").split("\0"))
        handles = []
        for pid, (ppid, args) in found.items():
            if ppid in found or _pgid(pid) != pid:
                continue
            labels = dict(a.split("=", 1) for a in args if a.startswith("rockroll.") and "=" in a)
            sock = args[args.index("--socket") + 1] if "--socket" in args else ""
            sid = labels.get("rockroll.sandbox", "")
            gen = labels.get("rockroll.generation", "0")
            extra = {"dir": os.path.dirname(sock), "labels": labels}
            if sock.startswith(SANDBOX_DIR + "/"):  # confined: the host path is the state directory's
                d = self._dir(labels.get("rockroll.manager", manager), f"{sid}-g{gen}")
                sock = str(d / "s.sock")
                extra.update(dir=str(d), cgroup=f"{labels.get('rockroll.manager', manager)}.{d.name}")
            handles.append(
                SandboxHandle(
                    sandbox_id=sid,
                    backend=self.name,
                    socket_path=sock,
                    ref=str(pid),
                    generation=int(gen),
                    started_at=time.time(),
                    extra=extra,
                )
            )
        return handles


_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")
"""Starts tied sandboxes: its one thread lives as long as the process, so PDEATHSIG fires only when the process dies."""
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: SIGKILL this child when ``parent`` dies (and at once if it already did)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def tie() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return tie


def _cgroup_left(name: str) -> bool:
    return any(d.exists() for d in cgroup_dirs(name))


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return -1


class ProcessConfig(BackendConfig):
    """Options of the ``process`` backend (see :class:`ProcessBackend`)."""

    type: ClassVar[str] = "process"
    state_dir: str = Field(
        default=DEFAULT_STATE_DIR, description="host directory of the sandboxes' sockets and workspaces"
    )
    isolation: Literal["auto", "bwrap", "unshare", "none"] = Field(
        default="auto", description="how each sandbox process is confined: auto picks the strongest that works here"
    )
    python: str = Field(default=sys.executable, description="interpreter that runs the in-sandbox server")
    user: str = Field(default=SANDBOX_USER, description="account the sandboxes run as, when the host has it")
    agent_uid: int = Field(default=AGENT_UID_BASE, description="first user id of the per-sandbox agent users")
    tie_to_parent: bool = Field(default=False, description="stop the sandboxes when this process dies")
    survive_owner: bool = Field(
        default=False, description="sandboxes outlive this process even when it is killed (a later manager adopts them)"
    )
    adopt_timeout_s: float = Field(
        default=ADOPT_TIMEOUT_S,
        ge=0,
        description="a sandbox handed over at shutdown that no manager adopts this long stops by itself (0: never)",
    )

    min_isolation: Literal["strongest", "none", "unshare", "bwrap", "confined"] | None = Field(
        default=None,
        description="weakest isolation level to start a sandbox with (rockroll.sandbox.confinement); "
        "unset: the one a control plane passed on, else none with a warning",
    )

    def build(self) -> ProcessBackend:
        return ProcessBackend(
            state_dir=self.state_dir, isolation=self.isolation, python=self.python, user=self.user,
            agent_uid=self.agent_uid, tie_to_parent=self.tie_to_parent, survive_owner=self.survive_owner,
            adopt_timeout_s=self.adopt_timeout_s,
            min_isolation=self.min_isolation,
        )  # fmt: skip
