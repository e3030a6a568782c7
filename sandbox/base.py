"""The sandbox backend contract: what Docker and process backends implement.

A backend starts, stops and lists *sandboxes*; each sandbox runs one in-sandbox server
(:mod:`rockroll.sandbox.server`) listening on a unix socket the host can reach. Everything a sandbox does
(env sessions, ``exec``, files, ``health``) goes through that socket with
:class:`~rockroll.sandbox.client.SandboxClient`, so backends only differ in how the server is started and
isolated. The abstract methods are the lifecycle (``start``, ``stop``, ``is_alive``,
``list_managed``); ``wait_ready``, ``health``, ``exec`` and the file calls are shared.

Threat model: code run in a sandbox (agent commands, env code) is untrusted. The host trusts only
the JSON it reads back over the socket. How strongly a sandbox is isolated is the backend's
business and is stated in its module docstring.
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field
from typing import Any

from rockroll.sandbox.client import SandboxClient
from rockroll.sandbox.errors import SandboxError, SandboxLost, SandboxTimeout

__all__ = ["SandboxSpec", "SandboxHandle", "ExecResult", "Health", "SandboxBackend", "DEFAULT_IMAGE"]

DEFAULT_IMAGE = "rockroll-sandbox:latest"


@dataclass(frozen=True)
class SandboxSpec:
    """How to build one sandbox; also the key of a warm pool.

    Attributes:
        name: pool name (sandboxes from equal specs are interchangeable).
        image: Docker image running the in-sandbox server (ignored by the process backend).
        cpus: CPU limit in cores.
        memory_mb: memory limit (the OOM killer stops a command that exceeds it).
        pids_limit: most processes/threads at once (stops fork bombs).
        workspace_mb: size of the writable workspace (tmpfs).
        network: give the sandbox a network; off by default (no egress, no host loopback).
        max_sessions: most env sessions one sandbox hosts.
        env: extra environment variables for the server.
        startup_timeout_s: how long ``wait_ready`` waits for the server.
    """

    name: str = "default"
    image: str = DEFAULT_IMAGE
    cpus: float = 1.0
    memory_mb: int = 512
    pids_limit: int = 256
    workspace_mb: int = 256
    network: bool = False
    max_sessions: int = 16
    env: tuple[tuple[str, str], ...] = ()
    startup_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"spec name must be letters, digits, '-' or '_', got {self.name!r}")
        if self.cpus <= 0 or self.memory_mb < 32 or self.pids_limit < 16 or self.workspace_mb < 1:
            raise ValueError("need cpus > 0, memory_mb >= 32, pids_limit >= 16 and workspace_mb >= 1")
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {self.max_sessions}")

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(map(list, v)) if k == "env" else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SandboxSpec:
        data = dict(data)
        data["env"] = tuple(tuple(kv) for kv in data.get("env", ()))
        return cls(**data)


@dataclass
class SandboxHandle:
    """Where one running sandbox is and how to reach it.

    Attributes:
        sandbox_id: stable id (kept across restarts).
        backend: backend name (``docker`` or ``process``).
        socket_path: host path of the server's unix socket.
        ref: container id, or the pid of the server process.
        host: Docker host URL (empty for processes).
        generation: bumped every time the sandbox is replaced.
        boot_id: the server's random id; a new server means old sessions are lost.
    """

    sandbox_id: str
    backend: str
    socket_path: str
    ref: str
    host: str = ""
    generation: int = 0
    boot_id: str = ""
    started_at: float = field(default_factory=time.time)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a command in a sandbox (timeouts and OOM kills are outcomes, not errors)."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    oom_killed: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExecResult:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class Health:
    """What a server's ``health`` call reports about its load."""

    boot_id: str
    sessions: int
    max_sessions: int
    cpu_seconds: float
    memory_bytes: int
    uptime_s: float
    pid: int

    @property
    def load(self) -> float:
        """Fraction of session slots in use (what load balancing sorts by)."""
        return self.sessions / max(1, self.max_sessions)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Health:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


class SandboxBackend(abc.ABC):
    """Starts and stops sandboxes; see the module docstring."""

    name: str = "abstract"

    @abc.abstractmethod
    def start(self, sandbox_id: str, spec: SandboxSpec, *, labels: dict[str, str]) -> SandboxHandle:
        """Start a sandbox (do not wait for its server); raise SandboxStartError/ImageNotFound."""

    @abc.abstractmethod
    def stop(self, handle: SandboxHandle) -> None:
        """Stop and remove the sandbox; idempotent."""

    @abc.abstractmethod
    def is_alive(self, handle: SandboxHandle) -> bool:
        """Whether the sandbox's container or process still runs."""

    @abc.abstractmethod
    def list_managed(self, manager: str) -> list[SandboxHandle]:
        """Every sandbox of ``manager`` the backend can find (for reconciliation after a restart)."""

    def exit_reason(self, handle: SandboxHandle) -> str:
        """Why a dead sandbox stopped (``oom-killed``, ``exit 137``...), best effort."""
        return ""

    def logs(self, handle: SandboxHandle, tail: int = 50) -> str:
        """The last lines of the server's log, best effort."""
        return ""

    # --------------------------------------------------------------- shared
    def client(self, handle: SandboxHandle, timeout_s: float = 60.0) -> SandboxClient:
        return SandboxClient(handle.socket_path, sandbox_id=handle.sandbox_id, timeout_s=timeout_s)

    def wait_ready(self, handle: SandboxHandle, timeout_s: float = 60.0) -> Health:
        """Poll ``health`` until the server answers; record its boot id on ``handle``."""
        deadline = time.monotonic() + timeout_s
        delay = 0.005
        client = self.client(handle, timeout_s=5.0)
        try:
            while True:
                try:
                    health = Health.from_dict(client.call("health"))
                    handle.boot_id = health.boot_id
                    return health
                except SandboxLost:
                    pass
                if not self.is_alive(handle):
                    raise SandboxError(f"sandbox {handle.sandbox_id} died while starting: {self.exit_reason(handle)}")
                if time.monotonic() > deadline:
                    raise SandboxTimeout(
                        f"sandbox {handle.sandbox_id} not ready after {timeout_s:.0f}s\n{self.logs(handle)}",
                        sandbox_id=handle.sandbox_id,
                        timeout_s=timeout_s,
                    )
                time.sleep(delay)
                delay = min(delay * 1.5, 0.1)
        finally:
            client.close()

    def health(self, handle: SandboxHandle, timeout_s: float = 5.0) -> Health:
        client = self.client(handle, timeout_s=timeout_s)
        try:
            return Health.from_dict(client.call("health"))
        finally:
            client.close()

    def exec(self, handle: SandboxHandle, cmd: str | list[str], **kwargs: Any) -> ExecResult:
        """Run a command in the sandbox; see :meth:`SandboxClient.exec`."""
        client = self.client(handle, timeout_s=float(kwargs.get("timeout_s", 30.0)) + 30.0)
        try:
            return client.exec(cmd, **kwargs)
        finally:
            client.close()

    def read_file(self, handle: SandboxHandle, path: str, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        """Read a workspace file (``SandboxPathError`` outside the workspace)."""
        client = self.client(handle)
        try:
            return client.read_file(path, max_bytes)
        finally:
            client.close()

    def write_file(self, handle: SandboxHandle, path: str, data: bytes | str, mode: int = 0o644) -> int:
        """Write a workspace file; returns the bytes written."""
        client = self.client(handle)
        try:
            return client.write_file(path, data, mode)
        finally:
            client.close()
