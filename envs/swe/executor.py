"""Where SWE-v0 runs the agent's commands: a small executor protocol and its implementations.

:class:`Executor` is all the env needs: ``run`` a shell command in the task's workspace, write and
read workspace files, ``reset`` the workspace to a snapshot, ``close``. Implementations:

* :class:`SandboxExecutor` (the normal one): one sandbox from :mod:`sandbox` per env, through
  the backend contract (:class:`rockroll.sandbox.base.SandboxBackend`: ``start``, ``wait_ready``, the
  in-sandbox server's ``exec`` and file calls, ``stop``). ``backend="docker"`` uses a locked-down
  container (read-only root, no network, CPU/memory/pids limits); ``"process"`` a local server
  process under bubblewrap where available (host filesystem read-only, no network, but no
  resource limits); ``"auto"`` Docker when a daemon answers and the sandbox image exists.
* :class:`LocalExecutor` (``backend="local"``, **the weaker fallback**, never chosen by
  ``"auto"``): a fresh temporary directory and a child process per command, wrapped in
  ``bwrap`` (read-only host filesystem, private ``/tmp`` and ``/run``, no network) when bubblewrap works here,
  otherwise a plain child process that *can* write anywhere the host user can. Use it only when
  the sandbox package cannot start a sandbox.

Every sandbox carries the label ``rockroll.manager=swe-env``; an env that is closed (or garbage
collected, or whose interpreter exits) stops its sandbox. After a hard crash, leftovers are found with
``<Backend>().list_managed("swe-env")`` and stopped with ``stop``.

Threat model: the commands are untrusted agent text. They must never run on the host itself;
isolation strength is that of the chosen backend (see :mod:`rockroll.sandbox.docker_backend` and
:mod:`rockroll.sandbox.process`). Everything an executor reads back is treated as untrusted text.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rockroll.envs.errors import EnvError

__all__ = [
    "Executor",
    "CommandResult",
    "ExecutorError",
    "SandboxExecutor",
    "LocalExecutor",
    "make_executor",
    "BACKENDS",
]

BACKENDS = ("auto", "docker", "process", "local")
MAX_CAPTURE = 1_000_000
#: set for every command: agent runs write no ``__pycache__`` that could go stale after an edit
_COMMAND_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}
_CLEAN_CMD = "chmod -R u+rwX . 2>/dev/null; find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +"


class ExecutorError(EnvError, RuntimeError):
    """The executor itself failed (sandbox died, could not start): an infrastructure failure.

    Not the agent's fault: rollout code should retry or mask the episode, never score it.
    """


@dataclass(frozen=True)
class CommandResult:
    """What one command did (a timeout is a result, not an error)."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False


class Executor(Protocol):
    """The operations SWE-v0 needs from wherever the workspace lives (see the module docstring)."""

    name: str

    def run(self, cmd: str, timeout_s: float) -> CommandResult: ...

    def write_file(self, path: str, content: str) -> None: ...

    def read_file(self, path: str) -> str: ...

    def reset(self, files: dict[str, str]) -> None: ...

    def close(self) -> None: ...


class SandboxExecutor:
    """An :class:`Executor` over one sandbox of the :mod:`sandbox` package.

    Args:
        backend: a started :class:`rockroll.sandbox.base.SandboxBackend` (Docker or process).
        spec: the sandbox's :class:`rockroll.sandbox.base.SandboxSpec` (default: a small one).
        env: extra environment variables for every command.
    """

    def __init__(self, backend: Any, spec: Any = None, *, env: dict[str, str] | None = None) -> None:
        from rockroll.sandbox.base import SandboxSpec
        from rockroll.sandbox.errors import SandboxError

        self.name = str(backend.name)
        self._backend = backend
        self._spec = spec or SandboxSpec(name="swe", cpus=1.0, memory_mb=512, workspace_mb=64)
        self._env = {**_COMMAND_ENV, **(env or {})}
        self._handle: Any = None
        self._client: Any = None
        sandbox_id = f"swe-{secrets.token_hex(5)}"
        labels = {"rockroll.managed": "1", "rockroll.manager": "swe-env", "rockroll.sandbox": sandbox_id}
        try:
            self._handle = backend.start(sandbox_id, self._spec, labels=labels)
            backend.wait_ready(self._handle, self._spec.startup_timeout_s)
            self._client = backend.client(self._handle, timeout_s=60.0)
        except (SandboxError, OSError) as e:
            self.close()
            raise ExecutorError(f"cannot start a {self.name} sandbox for SWE-v0: {e}") from e

    @property
    def isolation(self) -> str:
        extra = getattr(self._handle, "extra", {}) or {}
        return str(extra.get("isolation", self.name))

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from rockroll.sandbox.errors import SandboxPathError

        if self._client is None:
            raise ExecutorError("the sandbox executor is closed")
        try:
            return fn(*args, **kwargs)
        except SandboxPathError:
            raise
        except Exception as e:  # noqa: BLE001 - every other failure here is the infrastructure's
            raise ExecutorError(f"sandbox {what} failed: {type(e).__name__}: {e}") from e

    def run(self, cmd: str, timeout_s: float) -> CommandResult:
        res = self._call("exec", self._client.exec, cmd, timeout_s=timeout_s, env=self._env, max_output=MAX_CAPTURE)
        return CommandResult(res.exit_code, res.stdout, res.stderr, res.timed_out, res.truncated)

    def write_file(self, path: str, content: str) -> None:
        """Write a workspace file; raises :class:`rockroll.sandbox.errors.SandboxPathError` on a bad path."""
        self._call("write", self._client.write_file, path, content)

    def read_file(self, path: str) -> str:
        return bytes(self._call("read", self._client.read_file, path)).decode("utf-8", "replace")

    def reset(self, files: dict[str, str]) -> None:
        res = self.run(_CLEAN_CMD, 30.0)
        if res.exit_code != 0 or res.timed_out:
            raise ExecutorError(f"cannot clean the sandbox workspace: {res.stderr[-500:]}")
        for path, content in files.items():
            self.write_file(path, content)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._handle is not None:
            handle, self._handle = self._handle, None
            try:
                self._backend.stop(handle)
            except Exception:  # noqa: BLE001, S110 - closing must not raise; the manager reaps leftovers
                pass


class LocalExecutor:
    """The weaker fallback: a temporary directory and a child process per command.

    Under ``bwrap`` (when it works here) the host filesystem is read-only to commands, ``/tmp`` is
    private and there is no network; otherwise commands run as plain child processes with the
    host user's rights (``isolation == "none"``). Prefer :class:`SandboxExecutor`.
    """

    name = "local"

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="rockroll-swe-")
        self.isolation = "bwrap" if _bwrap_works() else "none"

    def _path(self, path: str) -> Path:
        full = Path(os.path.realpath(os.path.join(self.root, path)))
        if os.path.isabs(path) or not str(full).startswith(os.path.realpath(self.root) + os.sep):
            raise ValueError(f"path {path!r} is outside the workspace")
        return full

    def run(self, cmd: str, timeout_s: float) -> CommandResult:
        if self.root is None:
            raise ExecutorError("the local executor is closed")
        argv = ["/bin/sh", "-c", cmd]
        if self.isolation == "bwrap":
            argv = _bwrap_argv(self.root) + argv
        env = {
            "PATH": f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": self.root,
            **_COMMAND_ENV,
        }
        proc = subprocess.Popen(
            argv, cwd=self.root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _killpg(proc.pid)
            out, err = proc.communicate()
        _killpg(proc.pid)
        truncated = len(out) > MAX_CAPTURE or len(err) > MAX_CAPTURE
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        return CommandResult(
            code,
            out[:MAX_CAPTURE].decode("utf-8", "replace"),
            err[:MAX_CAPTURE].decode("utf-8", "replace"),
            timed_out,
            truncated,
        )

    def write_file(self, path: str, content: str) -> None:
        full = self._path(path)
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(content, encoding="utf-8")

    def read_file(self, path: str) -> str:
        return self._path(path).read_text(encoding="utf-8", errors="replace")

    def reset(self, files: dict[str, str]) -> None:
        self.run(_CLEAN_CMD, 30.0)
        for path, content in files.items():
            self.write_file(path, content)

    def close(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None  # type: ignore[assignment]


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


_BACKENDS: dict[str, Any] = {}  # one backend object per kind and process, shared by every env
_BACKENDS_LOCK = threading.Lock()


def _docker_backend() -> Any:
    """The shared Docker backend, or the reason (a str) it cannot be used; decided once per process."""
    with _BACKENDS_LOCK:
        if "docker" not in _BACKENDS:
            try:
                from rockroll.sandbox.base import DEFAULT_IMAGE
                from rockroll.sandbox.docker_backend import DockerBackend
                from rockroll.sandbox.errors import BackendUnavailable

                try:
                    found = DockerBackend()
                    if not found.has_image(DEFAULT_IMAGE):
                        found = f"the sandbox image {DEFAULT_IMAGE} is not built (run `rockroll image build`)"
                except BackendUnavailable as e:
                    found = f"Docker is not usable here: {e}"
            except ImportError as e:
                found = f"the Docker backend cannot be imported: {e}"
            _BACKENDS["docker"] = found
        return _BACKENDS["docker"]


def make_executor(backend: str) -> Any:
    """An executor for ``backend`` (see :data:`BACKENDS`); raises :class:`ExecutorError`.

    ``auto`` tries Docker once per process (daemon answers and the image exists) and otherwise
    uses the process backend from then on; inside a rockroll sandbox (``ROCKROLL_IN_SANDBOX=1``,
    set by the in-sandbox server) it uses :class:`LocalExecutor` within that sandbox.
    """
    if backend == "local" or (backend == "auto" and os.environ.get("ROCKROLL_IN_SANDBOX") == "1"):
        # Inside a rockroll sandbox (the env itself runs in a sandbox session) the sandbox is the
        # isolation boundary already: commands run as children in a private directory there.
        return LocalExecutor()
    try:
        from rockroll.sandbox.errors import SandboxError
        from rockroll.sandbox.process import ProcessBackend
    except ImportError as e:
        raise ExecutorError(
            f"the sandbox package is unusable ({e}); pass backend='local' for the weaker fallback"
        ) from e
    if backend in ("auto", "docker"):
        docker = _docker_backend()
        if not isinstance(docker, str):
            return SandboxExecutor(docker)
        if backend == "docker":
            raise ExecutorError(docker)
    try:
        with _BACKENDS_LOCK:
            process = _BACKENDS.setdefault("process", ProcessBackend())
        path = f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return SandboxExecutor(process, env={"PATH": path})
    except (SandboxError, ValueError) as e:
        raise ExecutorError(f"cannot start a process sandbox: {e}") from e
