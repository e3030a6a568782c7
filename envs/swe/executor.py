"""Where SWE-v0 runs the agent's commands: the executor protocol, a registry of kinds, a local fallback.

:class:`Executor` is all the env needs: ``run`` a shell command in the task's workspace, write and
read workspace files, ``reset`` the workspace to a snapshot, ``close``. Executors are built by kind
(:data:`EXECUTOR_KINDS` + :func:`make_executor`, like the engines):

* ``docker``, ``process`` and ``auto`` (the normal ones) are sandboxes of the sandbox layer,
  :class:`rockroll.sandbox.swe_executor.SandboxExecutor`, registered by
  :mod:`rockroll.sandbox.swe_executor` (found through the ``rockroll.swe_executors`` entry point,
  so ``envhub.make("SWE-v0")`` works without importing the sandbox package first and this layer
  never imports it). ``docker`` is a locked-down container (read-only root, no network,
  CPU/memory/pids limits); ``process`` a local server process under bubblewrap where available
  (host filesystem read-only, no network, but no resource limits); ``auto`` Docker when a daemon
  answers and the sandbox image exists, else ``process``.
* :class:`LocalExecutor` (``local``, **the weaker fallback**, never chosen by ``auto`` outside a
  sandbox): a fresh temporary directory and a child process per command, wrapped in ``bwrap``
  (read-only host filesystem, private ``/tmp`` and ``/run``, no network) when bubblewrap works here,
  otherwise a plain child process that *can* write anywhere the host user can. Use it only when
  no sandbox can start. Inside a rockroll sandbox whose server gives sessions their own uids
  (:func:`rockroll.envs.agent_identity.current_agent`), its directory is in the session's own 0700
  folder and every command runs as the session's uid with no capabilities: it cannot write the
  server's socket or files, nor read another session's workspace.

Adding a kind is one factory plus ``register_executor("name", factory)``.

Threat model: the commands are untrusted agent text. They must never run on the host itself;
isolation strength is that of the chosen kind (see :mod:`rockroll.sandbox.docker_backend` and
:mod:`rockroll.sandbox.process`). Everything an executor reads back is treated as untrusted text.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rockroll.envs.agent_identity import argv_as, current_agent, fs_as, kill_uid, wipe
from rockroll.envs.errors import EnvError
from rockroll.envs.exec_result import ExecResult
from rockroll.envs.plugins import load_plugins
from rockroll.envs.registries import Registry, UnknownNameError

__all__ = [
    "Executor",
    "ExecResult",
    "ExecutorError",
    "UnknownExecutorError",
    "LocalExecutor",
    "EXECUTOR_KINDS",
    "register_executor",
    "make_executor",
    "BACKENDS",
    "MAX_CAPTURE",
    "COMMAND_ENV",
    "CLEAN_CMD",
]

BACKENDS = ("auto", "docker", "process", "local")
MAX_CAPTURE = 1_000_000
#: set for every command: agent runs write no ``__pycache__`` that could go stale after an edit
COMMAND_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}
#: empties the workspace (``reset`` runs it before writing the task's files)
CLEAN_CMD = "chmod -R u+rwX . 2>/dev/null; find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +"


class ExecutorError(EnvError, RuntimeError):
    """The executor itself failed (sandbox died, could not start): an infrastructure failure.

    Not the agent's fault: rollout code should retry or mask the episode, never score it.
    """


class UnknownExecutorError(UnknownNameError, ExecutorError):
    """No executor kind has this name (its plugin may be missing): lists the known ones, suggests the nearest."""

    def __init__(self, backend: object, choices: tuple[str, ...]) -> None:
        super().__init__(
            "executor kind", backend, choices, "backend",
            hint="Is rockroll installed (its entry points register docker, process and auto)? "
            "Pass backend='local' for the weaker fallback.",
        )  # fmt: skip


class Executor(Protocol):
    """The operations SWE-v0 needs from wherever the workspace lives (see the module docstring)."""

    name: str

    def run(self, cmd: str, timeout_s: float) -> ExecResult: ...

    def write_file(self, path: str, content: str) -> None: ...

    def read_file(self, path: str) -> str: ...

    def reset(self, files: dict[str, str]) -> None: ...

    def close(self) -> None: ...


class LocalExecutor:
    """The weaker fallback: a temporary directory and a child process per command.

    Under ``bwrap`` (when it works here) the host filesystem is read-only to commands, ``/tmp`` is
    private and there is no network; otherwise commands run as plain child processes with the
    host user's rights (``isolation == "none"``). Prefer a sandbox kind (``docker``, ``process``).
    """

    name = "local"

    def __init__(self) -> None:
        self.identity = current_agent()  # a sandbox session's own uid, or None: this process's
        self.root: str | None  # the workspace (None once closed)
        if self.identity is not None:
            with fs_as(self.identity):
                self.root = tempfile.mkdtemp(prefix="swe-", dir=self.identity.home)
            self.isolation = "uid"
        else:
            self.root = tempfile.mkdtemp(prefix="rockroll-swe-")
            self.isolation = "bwrap" if _bwrap_works() else "none"

    def _workspace(self) -> str:
        if self.root is None:
            raise ExecutorError("the local executor is closed")
        return self.root

    def _path(self, path: str) -> Path:
        root = self._workspace()
        with fs_as(self.identity):
            full = Path(os.path.realpath(os.path.join(root, path)))
        if os.path.isabs(path) or not str(full).startswith(os.path.realpath(root) + os.sep):
            raise ValueError(f"path {path!r} is outside the workspace")
        return full

    def run(self, cmd: str, timeout_s: float) -> ExecResult:
        root = self._workspace()
        argv = argv_as(self.identity, ["/bin/sh", "-c", cmd], cwd=root if self.identity else None)
        if self.isolation == "bwrap":
            argv = _bwrap_argv(root) + argv
        env = {
            "PATH": f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": root,
            **COMMAND_ENV,
        }
        proc = subprocess.Popen(
            argv, cwd=root if self.identity is None else "/", env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _killpg(proc.pid)
            if self.identity is not None:  # its setsid children too, which would hold the pipes open
                kill_uid(self.identity.uid)
            out, err = proc.communicate()
        _killpg(proc.pid)
        truncated = len(out) > MAX_CAPTURE or len(err) > MAX_CAPTURE
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        return ExecResult(
            code,
            out[:MAX_CAPTURE].decode("utf-8", "replace"),
            err[:MAX_CAPTURE].decode("utf-8", "replace"),
            timed_out=timed_out,
            truncated=truncated,
        )

    def write_file(self, path: str, content: str) -> None:
        full = self._path(path)
        with fs_as(self.identity):
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(content, encoding="utf-8")

    def read_file(self, path: str) -> str:
        full = self._path(path)
        with fs_as(self.identity):
            return full.read_text(encoding="utf-8", errors="replace")

    def reset(self, files: dict[str, str]) -> None:
        self.run(CLEAN_CMD, 30.0)
        for path, content in files.items():
            self.write_file(path, content)

    def close(self) -> None:
        if self.root is not None:
            if self.identity is not None:
                wipe(self.root, self.identity, keep_top=True)  # as the agent: the server cannot enter its folder
                with fs_as(self.identity), contextlib.suppress(OSError):
                    os.rmdir(self.root)
            else:
                shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _bwrap_argv(root: str) -> list[str]:
    """Read-only host root, private ``/tmp`` and ``/run`` (hiding daemon sockets such as
    ``/var/run/docker.sock``: a unix socket reaches its daemon whatever the namespaces), no network."""
    hide = ["--tmpfs", "/tmp", "--tmpfs", "/run"]
    if os.path.isdir("/var/run") and os.path.realpath("/var/run") != "/run":
        hide += ["--tmpfs", "/var/run"]
    return [
        "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        *hide, "--bind", root, root, "--chdir", root, "--",
    ]  # fmt: skip


def _bwrap_works() -> bool:
    if not shutil.which("bwrap"):
        return False
    try:
        probe = _bwrap_argv(tempfile.gettempdir()) + ["true"]
        return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


ENTRY_POINT_GROUP = "rockroll.swe_executors"
#: executor kind -> factory of a fresh :class:`Executor` (raising :class:`ExecutorError`)
EXECUTOR_KINDS: Registry[Callable[[], Executor]] = Registry(
    "executor kind", "backend", entries={"local": LocalExecutor}, plugins=ENTRY_POINT_GROUP, error=UnknownExecutorError
)


def register_executor(kind: str, factory: Callable[[], Executor]) -> None:
    """Make ``make_executor(kind)`` call ``factory()`` (a later registration replaces an earlier one)."""
    EXECUTOR_KINDS.add(kind, factory, override=True)


def _load_plugins() -> None:
    """Import the modules of the ``rockroll.swe_executors`` entry points once (they register kinds)."""
    try:
        load_plugins(ENTRY_POINT_GROUP)
    except ImportError as e:
        raise ExecutorError(
            f"the sandbox executors are unusable ({e}); pass backend='local' for the weaker fallback"
        ) from e


def make_executor(backend: str) -> Executor:
    """An executor of kind ``backend`` (see :data:`BACKENDS`); raises :class:`ExecutorError`
    (:class:`UnknownExecutorError`, also a ``ValueError``, for an unknown kind).

    ``auto`` tries Docker once per process (daemon answers and the image exists) and otherwise
    uses the process backend from then on; inside a rockroll sandbox (``ROCKROLL_IN_SANDBOX=1``,
    set by the in-sandbox server) it uses :class:`LocalExecutor` within that sandbox.
    """
    if backend == "local" or (backend == "auto" and os.environ.get("ROCKROLL_IN_SANDBOX") == "1"):
        # Inside a rockroll sandbox (the env itself runs in a sandbox session) the sandbox is the
        # isolation boundary already: commands run as children in a private directory there.
        return LocalExecutor()
    if backend not in EXECUTOR_KINDS:
        _load_plugins()  # here, so that a broken plugin is an ExecutorError
    return EXECUTOR_KINDS.get(backend)()
