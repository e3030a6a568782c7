"""The host side of the in-sandbox server's protocol: JSON over HTTP/1.1 on a unix socket.

Each call is ``POST /<op>`` with a JSON object of arguments; the answer is
``{"result": ...}`` or ``{"error": {"type", "message", "attrs"}}``. Every answer carries the
server's boot id in ``X-Rockroll-Boot``: a client pinned to a boot id raises
:class:`~rockroll.sandbox.errors.SandboxLost` when a different server answers (the sandbox was replaced) or
when nobody answers at all. Server-side env errors come back as the same exception types a local
env raises, so rollout code does not care where the env runs.

Threat model: the server is untrusted; answers are size-capped JSON and nothing more.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
from typing import Any

from rockroll.sandbox import errors as sb_errors

__all__ = ["SandboxClient", "MAX_RESPONSE_BYTES"]

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
BOOT_HEADER = "X-Rockroll-Boot"


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
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = _UnixConnection(self.socket_path, timeout)
            self._conn.timeout = timeout
            if self._conn.sock is not None:
                self._conn.sock.settimeout(timeout)
            try:
                self._conn.request("POST", f"/{op}", body, {"Content-Type": "application/json"})
                resp = self._conn.getresponse()
                data = resp.read(MAX_RESPONSE_BYTES + 1)
                boot = resp.getheader(BOOT_HEADER, "")
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                # a stale keep-alive connection: retry once on a fresh one, then give up
                self.close()
                if attempt == 1:
                    raise sb_errors.SandboxLost(self.sandbox_id, f"connection dropped: {e}") from e
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
    ) -> Any:
        """Run ``cmd`` (argv list, or a shell string) and return an :class:`~rockroll.sandbox.base.ExecResult`."""
        from rockroll.sandbox.base import ExecResult

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

    def list_files(self, path: str = ".") -> list[dict[str, Any]]:
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
    from rockroll.envhub import errors as envhub_errors
    from rockroll.envs import errors as envs_errors

    types: dict[str, type[Exception]] = {}
    for mod in (envs_errors, envhub_errors, sb_errors):
        for name in mod.__all__:
            types[name] = getattr(mod, name)
    for builtin in (ValueError, TypeError, KeyError):
        types[builtin.__name__] = builtin
    return types
