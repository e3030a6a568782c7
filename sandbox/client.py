"""The host side of the in-sandbox server's protocol: JSON over HTTP/1.1 on a unix socket.

Each call is ``POST /<op>`` with a JSON object of arguments; the answer is
``{"result": ...}`` or ``{"error": {"type", "message", "attrs"}}``. Every answer carries the
server's boot id in ``X-Rockroll-Boot``: a client pinned to a boot id raises
:class:`~rockroll.sandbox.errors.SandboxLost` when a different server answers (the sandbox was replaced) or
when nobody answers at all. Server-side env errors come back as the same exception types a local
env raises, so rollout code does not care where the env runs. A connection the server dropped is
resent on a fresh one only for :data:`IDEMPOTENT_OPS`: a step or reset that may have reached the
server is never sent twice (it raises ``SandboxLost``, see :mod:`rockroll.sandbox.retry`).

Threat model: the server is untrusted; answers are size-capped JSON and nothing more.
"""

from __future__ import annotations

import base64
import http.client
import json
import select
import socket
from typing import Any, TypedDict

from rockroll.envhub import errors as envhub_errors
from rockroll.envs import errors as envs_errors
from rockroll.sandbox import errors as sb_errors
from rockroll.sandbox.results import ExecResult
from rockroll.sandbox.retry import retry_call
from rockroll.sandbox.server.wire import FileEntry

__all__ = ["ExecOptions", "SandboxClient", "MAX_RESPONSE_BYTES"]

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
BOOT_HEADER = "X-Rockroll-Boot"
IDEMPOTENT_OPS = frozenset(
    {"health", "env.get_state", "env.set_state", "env.action_candidates", "env.render", "files.read", "files.write",
     "files.list"}
)  # fmt: skip
"""Ops that are resent once after a dropped connection (a resend changes nothing). Any other op (a step,
reset, make, fork, batch or exec) may have run on the server before the drop: it raises ``SandboxLost``
instead of running twice."""
# the server closed the connection after (maybe) receiving the request
_DROPPED = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class ExecOptions(TypedDict, total=False):
    """The options of :meth:`SandboxClient.exec` (what the sandbox's and the manager's ``exec`` pass on)."""

    timeout_s: float
    cwd: str | None
    env: dict[str, str] | None
    max_output: int
    stdin: str | None


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("sandbox", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class SandboxClient:
    """One keep-alive connection to a sandbox's server (not thread-safe: one per thread)."""

    def __init__(self, socket_path: str, *, sandbox_id: str = "", timeout_s: float = 60.0, boot_id: str = "") -> None:
        self.socket_path = socket_path
        self.sandbox_id = sandbox_id
        self.timeout_s = timeout_s
        self.boot_id = boot_id
        self._conn: _UnixConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def call(self, op: str, timeout_s: float | None = None, **args: Any) -> Any:
        """Send one call and return its result; raise the server's error as a typed exception."""
        body = json.dumps(args).encode()
        timeout = self.timeout_s if timeout_s is None else timeout_s
        attempts = 2 if op in IDEMPOTENT_OPS else 1
        try:
            resp, data = retry_call(lambda: self._roundtrip(op, body, timeout), retry_on=_DROPPED, attempts=attempts)
        except _DROPPED as e:
            raise sb_errors.SandboxLost(self.sandbox_id, f"connection dropped during {op}: {e}") from e
        boot = resp.getheader(BOOT_HEADER, "")
        if self.boot_id and boot != self.boot_id:
            raise sb_errors.SandboxLost(self.sandbox_id, "the sandbox was replaced by a new server")
        if len(data) > MAX_RESPONSE_BYTES:
            self.close()
            raise sb_errors.RemoteError("ResponseTooLarge", f"answer to {op} exceeds {MAX_RESPONSE_BYTES} bytes")
        try:
            payload = json.loads(data)
        except ValueError as e:
            raise sb_errors.RemoteError("BadResponse", f"HTTP {resp.status}: {data[:200]!r}") from e
        if "error" in payload:
            raise _to_exception(payload["error"])
        return payload.get("result")

    def _roundtrip(self, op: str, body: bytes, timeout: float) -> tuple[http.client.HTTPResponse, bytes]:
        """One request on the kept-alive connection (a fresh one when the server closed it while idle)."""
        if self._conn is not None and self._conn.sock is not None and _closed_by_peer(self._conn.sock):
            self.close()  # nothing was sent on it: reconnecting is not a resend
        if self._conn is None:
            self._conn = _UnixConnection(self.socket_path, timeout)
        self._conn.timeout = timeout
        if self._conn.sock is not None:
            self._conn.sock.settimeout(timeout)
        try:
            self._conn.request("POST", f"/{op}", body, {"Content-Type": "application/json"})
            resp = self._conn.getresponse()
            return resp, resp.read(MAX_RESPONSE_BYTES + 1)
        except _DROPPED:
            self.close()
            raise
        except TimeoutError as e:
            self.close()
            raise sb_errors.SandboxTimeout(
                f"sandbox {self.sandbox_id} did not answer {op} within {timeout:.1f}s",
                sandbox_id=self.sandbox_id,
                timeout_s=timeout,
            ) from e
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise sb_errors.SandboxLost(self.sandbox_id, f"server unreachable: {e}") from e

    # ------------------------------------------------------------- helpers
    def exec(
        self,
        cmd: str | list[str],
        *,
        timeout_s: float = 30.0,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        max_output: int = 1_000_000,
        stdin: str | None = None,
    ) -> ExecResult:
        """Run ``cmd`` (argv list, or a shell string) and return an :class:`~rockroll.sandbox.results.ExecResult`."""
        res = self.call(
            "exec",
            timeout_s=timeout_s + 30.0,
            cmd=cmd,
            cmd_timeout_s=timeout_s,
            cwd=cwd,
            env=env or {},
            max_output=max_output,
            stdin=stdin,
        )
        return ExecResult.from_dict(res)

    def read_file(self, path: str, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        return base64.b64decode(self.call("files.read", path=path, max_bytes=max_bytes)["data"])

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> int:
        raw = data.encode() if isinstance(data, str) else data
        return int(self.call("files.write", path=path, data=base64.b64encode(raw).decode(), mode=mode)["size"])

    def list_files(self, path: str = ".") -> list[FileEntry]:
        return list(self.call("files.list", path=path))


def _to_exception(err: dict[str, Any]) -> Exception:
    """Rebuild a server-side error as the local exception type of the same name."""
    kind = str(err.get("type", "Error"))
    message = str(err.get("message", ""))
    attrs = err.get("attrs") or {}
    cls = _known_types().get(kind)
    if cls is None:
        return sb_errors.RemoteError(kind, message)
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    for k, v in attrs.items():
        setattr(exc, k, v)
    return exc


def _known_types() -> dict[str, type[Exception]]:
    types: dict[str, type[Exception]] = {}
    for mod in (envs_errors, envhub_errors, sb_errors):
        for name in mod.__all__:
            types[name] = getattr(mod, name)
    for builtin in (ValueError, TypeError, KeyError):
        types[builtin.__name__] = builtin
    return types


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether an idle kept-alive socket is readable: the server closed it (or wrote out of turn)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
    try:
        return bool(poller.poll(0))
    except OSError:
        return True
