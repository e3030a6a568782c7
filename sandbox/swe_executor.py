"""SWE-v0's sandbox executors: the agent's commands run in a sandbox of this package.

:class:`SandboxExecutor` implements :class:`rockroll.envs.swe.executor.Executor` over one sandbox,
through the backend contract (:class:`rockroll.sandbox.base.SandboxBackend`: ``start``,
``wait_ready``, the in-sandbox server's ``exec`` and file calls, ``stop``). Importing this module
registers the executor kinds ``docker``, ``process`` and ``auto`` with
:func:`rockroll.envs.swe.executor.register_executor`; the ``rockroll.swe_executors`` entry point
(pyproject.toml) imports it the first time SWE-v0 asks for one of them, so the env layer never
imports the sandbox layer.

Every sandbox carries the label ``rockroll.manager=swe-env``; an env that is closed (or garbage
collected, or whose interpreter exits) stops its sandbox. After a hard crash, leftovers are found with
``<Backend>().list_managed("swe-env")`` and stopped with ``stop``.

Threat model: the commands are untrusted agent text. They never run on the host itself; isolation
strength is that of the backend (see :mod:`rockroll.sandbox.docker_backend` and
:mod:`rockroll.sandbox.process`). Everything read back is treated as untrusted text.
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
from typing import Any

from rockroll.envs.swe.executor import (
    CLEAN_CMD,
    COMMAND_ENV,
    MAX_CAPTURE,
    ExecutorError,
    register_executor,
)
from rockroll.sandbox.base import DEFAULT_IMAGE, ExecResult, SandboxBackend, SandboxSpec
from rockroll.sandbox.docker_backend import DockerBackend
from rockroll.sandbox.errors import BackendUnavailable, SandboxError, SandboxPathError
from rockroll.sandbox.process import ProcessBackend

__all__ = ["SandboxExecutor", "docker_executor", "process_executor", "auto_executor"]


class SandboxExecutor:
    """An :class:`~rockroll.envs.swe.executor.Executor` over one sandbox of this package.

    Args:
        backend: a started :class:`rockroll.sandbox.base.SandboxBackend` (Docker or process).
        spec: the sandbox's :class:`rockroll.sandbox.base.SandboxSpec` (default: a small one).
        env: extra environment variables for every command.
    """

    def __init__(
        self, backend: SandboxBackend, spec: SandboxSpec | None = None, *, env: dict[str, str] | None = None
    ) -> None:
        self.name = str(backend.name)
        self._backend = backend
        self._spec = spec or SandboxSpec(name="swe", cpus=1.0, memory_mb=512, workspace_mb=64)
        self._env = {**COMMAND_ENV, **(env or {})}
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
        if self._client is None:
            raise ExecutorError("the sandbox executor is closed")
        try:
            return fn(*args, **kwargs)
        except SandboxPathError:
            raise
        except Exception as e:  # noqa: BLE001 - every other failure here is the infrastructure's
            raise ExecutorError(f"sandbox {what} failed: {type(e).__name__}: {e}") from e

    def run(self, cmd: str, timeout_s: float) -> ExecResult:
        """Run ``cmd`` in the workspace; the sandbox's :class:`~rockroll.envs.exec_result.ExecResult` as it came."""
        return self._call("exec", self._client.exec, cmd, timeout_s=timeout_s, env=self._env, max_output=MAX_CAPTURE)

    def write_file(self, path: str, content: str) -> None:
        """Write a workspace file; raises :class:`rockroll.sandbox.errors.SandboxPathError` on a bad path."""
        self._call("write", self._client.write_file, path, content)

    def read_file(self, path: str) -> str:
        return bytes(self._call("read", self._client.read_file, path)).decode("utf-8", "replace")

    def reset(self, files: dict[str, str]) -> None:
        res = self.run(CLEAN_CMD, 30.0)
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


_BACKENDS: dict[str, Any] = {}  # one backend object per kind and process, shared by every env
_BACKENDS_LOCK = threading.Lock()


def _docker_backend() -> DockerBackend | str:
    """The shared Docker backend, or the reason (a str) it cannot be used; decided once per process."""
    with _BACKENDS_LOCK:
        if "docker" not in _BACKENDS:
            try:
                backend = DockerBackend()
                found: DockerBackend | str = backend
                if not backend.has_image(DEFAULT_IMAGE):
                    found = f"the sandbox image {DEFAULT_IMAGE} is not built (run `rockroll image build`)"
            except BackendUnavailable as e:
                found = f"Docker is not usable here: {e}"
            _BACKENDS["docker"] = found
        return _BACKENDS["docker"]


def process_executor() -> SandboxExecutor:
    """A process sandbox (one shared :class:`ProcessBackend` per process)."""
    try:
        with _BACKENDS_LOCK:
            process = _BACKENDS.setdefault("process", ProcessBackend())
        path = f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return SandboxExecutor(process, env={"PATH": path})
    except (SandboxError, ValueError) as e:
        raise ExecutorError(f"cannot start a process sandbox: {e}") from e


def docker_executor() -> SandboxExecutor:
    """A Docker sandbox; :class:`ExecutorError` saying why when Docker or the image is missing."""
    docker = _docker_backend()
    if isinstance(docker, str):
        raise ExecutorError(docker)
    return SandboxExecutor(docker)


def auto_executor() -> SandboxExecutor:
    """Docker when usable (decided once per process), else a process sandbox."""
    docker = _docker_backend()
    return process_executor() if isinstance(docker, str) else SandboxExecutor(docker)


register_executor("docker", docker_executor)
register_executor("process", process_executor)
register_executor("auto", auto_executor)
