"""Typed errors of the sandbox layer.

Every error derives from :class:`SandboxError` and carries structured attributes, so the API
layer can map them onto HTTP errors and rollout code can tell an infrastructure failure (retry
it, never score it) from an agent's failure. Expected outcomes of a command (non-zero exit,
timeout, out of memory) are not errors: they come back as :class:`~rockroll.sandbox.base.ExecResult`.

:class:`SandboxError` derives from :class:`~rockroll.envs.errors.RockrollError` (re-exported here).
:class:`StatusError` is the base of error answers of rockroll's HTTP services (the API client's
``ApiClientError``): it lives here so the rollout layer can tell a 4xx from a 5xx without importing
the API. :class:`SandboxLost` is the one "sandbox lost" type: the API client's ``SandboxLostError``
derives from it, so ``except SandboxLost`` covers local, sandboxed and remote sessions alike.
"""

from __future__ import annotations

from typing import Any

from rockroll.envs.errors import RockrollError

__all__ = [
    "RockrollError",
    "StatusError",
    "SandboxError",
    "SandboxNotFound",
    "SandboxTimeout",
    "SandboxStartError",
    "SandboxLost",
    "SessionLost",
    "CapacityError",
    "ImageNotFound",
    "BackendUnavailable",
    "SandboxPathError",
    "FileTooLarge",
    "SessionNotFound",
    "RemoteError",
]


class SandboxError(RockrollError):
    """Base class of every sandbox error."""


class StatusError(RockrollError):
    """An error answer of a rockroll HTTP service: HTTP ``status``, a ``code``, a ``message`` and ``details``.

    4xx answers other than 408/409/410/429 mean the request itself is wrong (retrying cannot help).
    """

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        RockrollError.__init__(self, f"{status} {code}: {message}")  # not super(): subclasses mix in SandboxLost
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


class SandboxNotFound(SandboxError, LookupError):
    """No sandbox with this id is managed here."""

    def __init__(self, sandbox_id: str) -> None:
        super().__init__(f"no sandbox {sandbox_id!r} (list them with SandboxManager.list())")
        self.sandbox_id = sandbox_id


class SandboxTimeout(SandboxError, TimeoutError):
    """A sandbox did not become ready, or did not answer, in time."""

    def __init__(self, message: str, *, sandbox_id: str = "", timeout_s: float = 0.0) -> None:
        super().__init__(message)
        self.sandbox_id = sandbox_id
        self.timeout_s = timeout_s


class SandboxStartError(SandboxError, RuntimeError):
    """The backend could not start a sandbox (bad spec, daemon error, server crashed at boot)."""

    def __init__(self, message: str, *, sandbox_id: str = "", logs: str = "") -> None:
        super().__init__(message + (f"\n--- sandbox log tail ---\n{logs}" if logs else ""))
        self.sandbox_id = sandbox_id
        self.logs = logs


class SandboxLost(SandboxError, ConnectionError):
    """The sandbox hosting this session died or was replaced; the session's state is gone.

    Retry by opening a new session: the manager brings the sandbox itself back on its own.
    """

    def __init__(self, sandbox_id: str, reason: str = "") -> None:
        super().__init__(f"sandbox {sandbox_id!r} was lost{': ' + reason if reason else ''}; open a new session")
        self.sandbox_id = sandbox_id
        self.reason = reason


class SessionLost(SandboxLost):
    """One session's env process (a custom env's worker) died or hung; the sandbox itself lives on.

    A :class:`SandboxLost` (the control plane's ``410 sandbox_lost``): retry by opening a new session.
    """

    def __init__(self, reason: str, sandbox_id: str = "") -> None:
        SandboxError.__init__(self, f"this session's env worker was lost: {reason}; open a new session")
        self.sandbox_id = sandbox_id
        self.reason = reason


class CapacityError(SandboxError, RuntimeError):
    """A limit on sandboxes (or on sessions per sandbox) is reached."""

    def __init__(self, active: int, limit: int, what: str = "sandboxes") -> None:
        super().__init__(f"capacity reached: {active} active {what}, limit {limit}; delete some or raise the limit")
        self.active = active
        self.limit = limit
        self.what = what


class ImageNotFound(SandboxError, LookupError):
    """The sandbox image does not exist on the Docker host (build it: ``rockroll image build``)."""

    def __init__(self, image: str, host: str = "") -> None:
        super().__init__(f"image {image!r} not found on {host or 'the Docker host'}; run `rockroll image build`")
        self.image = image
        self.host = host


class BackendUnavailable(SandboxError, RuntimeError):
    """The backend cannot be used here (no Docker daemon reachable, ...)."""


class SandboxPathError(SandboxError, ValueError):
    """A file path is outside the sandbox workspace, escapes it through a symlink, or is invalid."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid sandbox path {path!r}: {reason}")
        self.path = path
        self.reason = reason


class FileTooLarge(SandboxPathError):
    """A file to read or write through the files calls is larger than their cap."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(path, f"{size} bytes, over the cap of {limit} bytes")
        self.size = size
        self.limit = limit


class SessionNotFound(SandboxError, LookupError):
    """The in-sandbox server has no env session with this id (closed, or never opened)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no env session {session_id!r} in this sandbox")
        self.session_id = session_id


class RemoteError(SandboxError, RuntimeError):
    """The in-sandbox server failed with an error that has no local type.

    Attributes:
        kind: the server-side exception class name.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
