"""``ManagedSandbox``: one sandbox as the manager tracks it, and the object callers get back.

It keeps the sandbox's stable id across restarts (each restart bumps ``generation``), its state
(``starting``, ``ready``, ``unhealthy``, ``restarting``, ``stopped``), its load, and offers the
calls of the in-sandbox server: ``exec``, files, ``health`` and ``open_session``. Calls pinned to
an incarnation raise :class:`~rockroll.sandbox.errors.SandboxLost` once it is gone.

Threat model: as :mod:`rockroll.sandbox.base`; everything read back is untrusted data.
"""

from __future__ import annotations

import threading
import time
from enum import StrEnum
from typing import Any, Unpack

from rockroll.sandbox.base import ExecResult, Health, SandboxBackend, SandboxHandle, SandboxSpec
from rockroll.sandbox.client import ExecOptions, SandboxClient
from rockroll.sandbox.errors import CapacityError, SandboxLost, SessionLost
from rockroll.sandbox.server.wire import FileEntry, OpenedSession
from rockroll.sandbox.session import RemoteSession

__all__ = ["ManagedSandbox", "SandboxState", "STATES"]


class SandboxState(StrEnum):
    """Where a managed sandbox is in its life (the strings are what records and the API show)."""

    STARTING = "starting"  #: booting; takes no calls yet
    READY = "ready"  #: healthy; takes sessions
    UNHEALTHY = "unhealthy"  #: failed a probe or a call; no new sessions until a probe passes or it is replaced
    RESTARTING = "restarting"  #: being replaced under the same id (generation bumped)
    STOPPED = "stopped"  #: deleted


STATES = tuple(SandboxState)
_NO_CALLS = (SandboxState.STOPPED, SandboxState.RESTARTING, SandboxState.STARTING)


class ManagedSandbox:
    """A sandbox under a :class:`~rockroll.sandbox.manager.SandboxManager` (see the module docstring)."""

    def __init__(self, sandbox_id: str, spec: SandboxSpec, backend: SandboxBackend, *, pool: str = "") -> None:
        self.id = sandbox_id
        self.spec = spec
        self.backend = backend
        self.pool = pool
        self.handle: SandboxHandle | None = None
        self.state: SandboxState = SandboxState.STARTING
        self.generation = 0
        self.restarts = 0
        self.failures = 0
        self.sessions = 0  # slots taken: this manager's sessions, or more when the sandbox reports more
        self.opened = 0  # this manager's own sessions here (opening, open or forked; not yet closed)
        self.stray_probes = 0  # probes in a row that found sessions here while this manager holds none
        self.leased = False
        self.deleted = False
        self.created_at = time.time()
        self.last_used = time.monotonic()
        self.last_health: Health | None = None
        self.lock = threading.RLock()
        self._dirty = threading.Event()

    def __repr__(self) -> str:
        return f"ManagedSandbox({self.id}, {self.state}, gen={self.generation}, sessions={self.sessions})"

    @property
    def load(self) -> float:
        return self.sessions / self.spec.max_sessions

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def client(self, timeout_s: float = 60.0) -> SandboxClient:
        handle = self.handle
        if self.deleted or handle is None or self.state in _NO_CALLS:
            raise SandboxLost(self.id, f"sandbox is {self.state if not self.deleted else 'deleted'}")
        return SandboxClient(handle.socket_path, sandbox_id=self.id, timeout_s=timeout_s, boot_id=handle.boot_id)

    def report_failure(self) -> None:
        """A caller saw the server unreachable: take no new sessions, and ask the monitor to probe now.

        A ``ready`` sandbox becomes ``unhealthy`` until the probe says otherwise (it goes back to
        ``ready``) or replaces it; without this, a dead sandbox looks like the least-loaded one
        (its sessions were given back) and attracts every new session until the next probe.
        """
        with self.lock:
            if self.state == SandboxState.READY and not self.deleted:
                self.state = SandboxState.UNHEALTHY
        self._dirty.set()

    # ------------------------------------------------------------- calls
    def health(self, timeout_s: float = 5.0) -> Health:
        c = self.client(timeout_s)
        try:
            return Health.from_dict(c.call("health"))
        finally:
            c.close()

    def exec(self, cmd: str | list[str], **kwargs: Unpack[ExecOptions]) -> ExecResult:
        """Run a command in the workspace; see :meth:`rockroll.sandbox.client.SandboxClient.exec`."""
        self.touch()
        c = self.client(float(kwargs.get("timeout_s", 30.0)) + 30.0)
        try:
            return c.exec(cmd, **kwargs)
        except SandboxLost:
            self.report_failure()
            raise
        finally:
            c.close()

    def read_file(self, path: str, max_bytes: int = 16 * 1024 * 1024, timeout_s: float = 60.0) -> bytes:
        self.touch()
        c = self.client(timeout_s)
        try:
            return c.read_file(path, max_bytes)
        finally:
            c.close()

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644, timeout_s: float = 60.0) -> int:
        self.touch()
        c = self.client(timeout_s)
        try:
            return c.write_file(path, data, mode)
        finally:
            c.close()

    def list_files(self, path: str = ".") -> list[FileEntry]:
        c = self.client()
        try:
            return c.list_files(path)
        finally:
            c.close()

    # ---------------------------------------------------------- sessions
    def open_session(self, env_id: str, **kwargs: object) -> RemoteSession:
        """Open an env session here (the manager's ``open_session`` picks the sandbox for you)."""
        with self.lock:
            if self.sessions >= self.spec.max_sessions:
                raise CapacityError(self.sessions, self.spec.max_sessions, "sessions")
            self.reserve()
        return self.open_reserved(env_id, kwargs)

    def reserve(self) -> None:
        """Take a session slot for an open about to be made (given back by :meth:`session_closed`)."""
        with self.lock:
            self.sessions += 1
            self.opened += 1

    def open_reserved(self, env_id: str, kwargs: dict[str, object]) -> RemoteSession:
        """Open a session in a slot already counted in ``sessions`` (given back on failure)."""
        self.touch()
        try:
            c = self.client()
            info = c.call("env.make", env_id=env_id, kwargs=kwargs)
        except SessionLost:  # the new session's env process failed, not the sandbox
            self.session_closed()
            raise
        except SandboxLost:
            self.session_closed()
            self.report_failure()
            raise
        except BaseException:
            self.session_closed()
            raise
        return RemoteSession(self, info, c)

    def attach_session(self, info: OpenedSession) -> RemoteSession:
        """Wrap a session the server already opened (by ``fork``)."""
        self.reserve()
        return RemoteSession(self, info, self.client())

    def session_closed(self) -> None:
        with self.lock:
            self.sessions = max(0, self.sessions - 1)
            self.opened = max(0, self.opened - 1)
        self.touch()

    def to_record(self) -> dict[str, Any]:
        h = self.handle
        return {
            "id": self.id,
            "backend": self.backend.name,
            "spec": self.spec.to_dict(),
            "pool": self.pool,
            "state": str(self.state),
            "socket_path": h.socket_path if h else "",
            "ref": h.ref if h else "",
            "host": h.host if h else "",
            "generation": self.generation,
            "boot_id": h.boot_id if h else "",
            "restarts": self.restarts,
            "leased": self.leased,
        }
