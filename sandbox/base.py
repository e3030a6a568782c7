"""The sandbox backend contract: what Docker and process backends implement.

A backend starts, stops and lists *sandboxes*; each sandbox runs one in-sandbox server
(:mod:`rockroll.sandbox.server`) listening on a unix socket the host can reach. Everything a sandbox does
(env sessions, ``exec``, files, ``health``) goes through that socket with
:class:`~rockroll.sandbox.client.SandboxClient`, so backends only differ in how the server is started and
isolated (what its calls answer, :class:`ExecResult` and :class:`Health`, lives in
:mod:`rockroll.sandbox.results`, below both). The abstract methods are the lifecycle (``start``, ``stop``, ``is_alive``,
``list_managed``); ``wait_ready``, ``health``, ``exec`` and the file calls are shared.

Threat model: code run in a sandbox (agent commands, env code) is untrusted. The host trusts only
the JSON it reads back over the socket. How strongly a sandbox is isolated is the backend's
business and is stated in its module docstring.
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field
from typing import Any, Unpack

from pydantic import ConfigDict, Field

from rockroll.envs.config import ConfigModel, parse_config
from rockroll.sandbox.client import ExecOptions, SandboxClient
from rockroll.sandbox.errors import SandboxError, SandboxLost, SandboxTimeout
from rockroll.sandbox.results import ExecResult, Health
from rockroll.sandbox.retry import POLL_MAX_DELAY_S, Backoff

__all__ = ["SandboxSpec", "SandboxHandle", "ExecResult", "Health", "SandboxBackend", "DEFAULT_IMAGE"]

DEFAULT_IMAGE = "rockroll-sandbox:latest"


class SandboxSpec(ConfigModel):
    """How to build one sandbox; also the key of a warm pool (frozen and hashable).

    A :class:`~rockroll.envs.config.ConfigModel` (every field described and bounded; a bad field
    raises :class:`~rockroll.envs.config.ConfigError`); the API's ``SandboxCreate`` body is derived
    from its fields.
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(
        default="default", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$",
        description="Pool name (sandboxes from equal specs are interchangeable): letters, digits, '-' or '_'.",
    )  # fmt: skip
    image: str = Field(
        default=DEFAULT_IMAGE,
        max_length=256,
        description="Docker image running the in-sandbox server (ignored by processes).",
    )
    cpus: float = Field(default=1.0, gt=0, le=64, description="CPU limit in cores.")
    memory_mb: int = Field(
        default=512, ge=32, le=262_144, description="Memory limit; the OOM killer stops a command above it."
    )
    pids_limit: int = Field(
        default=256, ge=16, le=65_536, description="Most processes/threads at once (stops fork bombs)."
    )
    workspace_mb: int = Field(default=256, ge=1, le=65_536, description="Size of the writable workspace (tmpfs).")
    network: bool = Field(
        default=False, description="Give the sandbox a network; off by default (no egress, no loopback)."
    )
    max_sessions: int = Field(default=16, ge=1, le=4096, description="Most env sessions one sandbox hosts.")
    env: tuple[tuple[str, str], ...] = Field(
        default=(), description="Extra environment variables of the server, as pairs."
    )
    startup_timeout_s: float = Field(default=60.0, gt=0, description="How long wait_ready waits for the server.")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (``env`` as a list of pairs), what :meth:`from_dict` reads back."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SandboxSpec:
        return parse_config(cls, data)


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


class SandboxBackend(abc.ABC):
    """Starts and stops sandboxes; see the module docstring."""

    name: str = "abstract"
    #: the isolation level its sandboxes get (:mod:`rockroll.sandbox.confinement`): a backend that does not
    #: say is taken as ``none``
    level: str = "none"
    #: while waiting for a sandbox's server, ask :meth:`is_alive` at most this often (seconds); 0: every poll
    alive_check_s: float = 0.0

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

    def release(self, handle: SandboxHandle) -> None:
        """Leave the sandbox running for a later manager to adopt (a backend whose sandboxes otherwise
        end with the process that started them, like ``process``, marks it so); a no-op by default."""
        return None

    # --------------------------------------------------------------- shared
    def client(self, handle: SandboxHandle, timeout_s: float = 60.0) -> SandboxClient:
        return SandboxClient(handle.socket_path, sandbox_id=handle.sandbox_id, timeout_s=timeout_s)

    def wait_ready(self, handle: SandboxHandle, timeout_s: float = 60.0) -> Health:
        """Poll ``health`` until the server answers; record its boot id on ``handle``."""
        client = self.client(handle, timeout_s=5.0)
        checked = float("-inf")
        try:
            for _ in Backoff(timeout_s=timeout_s, max_delay_s=POLL_MAX_DELAY_S):
                try:
                    health = Health.from_dict(client.call("health"))
                    handle.boot_id = health.boot_id
                    return health
                except SandboxLost:
                    pass
                if time.monotonic() - checked < self.alive_check_s:
                    continue
                checked = time.monotonic()
                if not self.is_alive(handle):
                    raise SandboxError(f"sandbox {handle.sandbox_id} died while starting: {self.exit_reason(handle)}")
        finally:
            client.close()
        raise SandboxTimeout(
            f"sandbox {handle.sandbox_id} not ready after {timeout_s:.0f}s\n{self.logs(handle)}",
            sandbox_id=handle.sandbox_id,
            timeout_s=timeout_s,
        )

    def health(self, handle: SandboxHandle, timeout_s: float = 5.0) -> Health:
        client = self.client(handle, timeout_s=timeout_s)
        try:
            return Health.from_dict(client.call("health"))
        finally:
            client.close()

    def exec(self, handle: SandboxHandle, cmd: str | list[str], **kwargs: Unpack[ExecOptions]) -> ExecResult:
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
