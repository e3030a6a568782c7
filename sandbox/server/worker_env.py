"""The server's side of a custom env session: an env-shaped proxy for a worker process.

:class:`WorkerEnv` starts :mod:`rockroll.sandbox.server.env_worker` as the session's agent identity
(:func:`~rockroll.envs.agent_identity.argv_as`: that uid and gid, no capability in any set,
``no_new_privs``, cwd the session's 0700 folder, ``HOME`` too) and forwards ``reset``, ``step``,
``get_state``, ``set_state``, ``action_candidates``, ``render`` and ``close`` to it as JSON frames
(:func:`~rockroll.sandbox.server.env_worker.write_frame`); ``fork`` is a second worker given the
first one's state. Every call has a deadline (``ROCKROLL_ENV_WORKER_TIMEOUT_S``, default
:data:`DEFAULT_TIMEOUT_S`, under the host client's 60 s) and every answer a size cap
(:data:`~rockroll.sandbox.server.env_worker.MAX_FRAME_BYTES`). A worker that dies, hangs past
the deadline, answers too much or answers garbage is killed, and this call and every later one of
the session raise :class:`~rockroll.sandbox.errors.SessionLost` (the control plane's ``410
sandbox_lost``); the server and its other sessions carry on.

Threat model: the worker is untrusted. Its answers are parsed as JSON only (never unpickled), capped
and read with a deadline, off the server's other threads (each session has its own lock); the
errors it reports are rebuilt only as rockroll's env errors or ``ValueError``/``TypeError``/
``KeyError`` with scalar attributes, anything else as :class:`~rockroll.sandbox.errors.RemoteError`.
"""

from __future__ import annotations

import collections
import io
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

from rockroll.envs import errors as envs_errors
from rockroll.envs.action_wire import tools_from_wire
from rockroll.envs.agent_identity import AgentIdentity, argv_as
from rockroll.envs.json_types import JSONValue
from rockroll.envs.tools import Action, action_to_wire
from rockroll.sandbox.errors import RemoteError, SessionLost
from rockroll.sandbox.server.env_worker import _HEADER, MAX_FRAME_BYTES

__all__ = ["WorkerEnv", "TIMEOUT_ENV", "DEFAULT_TIMEOUT_S"]

TIMEOUT_ENV = "ROCKROLL_ENV_WORKER_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 50.0
_STDERR_TAIL = 2000


def _timeout_s() -> float:
    try:
        return max(0.1, float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def _rebuild(err: JSONValue) -> Exception:
    """The worker's error as an exception of the server (see the module docstring)."""
    if not isinstance(err, dict):
        return RemoteError("BadAnswer", "the env worker answered a malformed error")
    kind, message = str(err.get("type", "Error"))[:100], str(err.get("message", ""))[:4000]
    from rockroll.sandbox.server.env_registry import error_modules  # here: it imports gymnasium

    known: dict[str, type[Exception]] = {t.__name__: t for t in (ValueError, TypeError, KeyError)}
    for mod in (envs_errors, *error_modules()):
        known.update({name: getattr(mod, name) for name in mod.__all__})
    cls = known.get(kind)
    if cls is None or not issubclass(cls, Exception):
        return RemoteError(kind, message)
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    attrs = err.get("attrs")
    for k, v in attrs.items() if isinstance(attrs, dict) else ():
        if (
            isinstance(k, str)
            and k.isidentifier()
            and not k.startswith("_")
            and isinstance(v, (str, int, float, bool, type(None)))
        ):
            setattr(exc, k, v)
    return exc


class _Unwrapped:
    __slots__ = ("spec_id",)

    def __init__(self, spec_id: str) -> None:
        self.spec_id = spec_id


class WorkerEnv:
    """A custom env hosted in a worker process running as ``identity`` (see the module docstring)."""

    def __init__(
        self, identity: AgentIdentity, env_id: str, kwargs: dict[str, object], state: JSONValue = None
    ) -> None:
        self.identity = identity
        self.timeout_s = _timeout_s()
        self._lost = ""
        self._tail: collections.deque[bytes] = collections.deque()
        env = dict(os.environ, HOME=identity.home, PYTHONDONTWRITEBYTECODE="1")
        argv = argv_as(identity, [sys.executable, "-m", "rockroll.sandbox.server.env_worker"], cwd=identity.home)
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd="/", env=env, close_fds=True, start_new_session=True,
        )  # fmt: skip
        assert self._proc.stdin is not None and self._proc.stdout is not None  # all three are pipes
        self._in, self._out = self._proc.stdin.fileno(), self._proc.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        threading.Thread(target=self._drain_stderr, name="env-worker-stderr", daemon=True).start()
        try:
            info = self._call("make", env_id=env_id, kwargs=kwargs, state=state)
            if not isinstance(info, dict):
                raise self._fail("the env worker answered make with something else than an object")
        except BaseException:
            self.kill()
            raise
        self.unwrapped = _Unwrapped(str(info.get("env_id", "")))
        self._system_prompt = str(info.get("system_prompt", ""))
        #: the env's tools, as the worker listed them
        self.tools = tools_from_wire(info.get("tools"))

    # ------------------------------------------------------------- env contract
    def system_prompt(self) -> str:
        return self._system_prompt

    def reset(
        self, *, seed: int | None = None, options: dict[str, JSONValue] | None = None
    ) -> tuple[JSONValue, JSONValue]:
        obs, info = self._shaped(self._call("reset", seed=seed, options=options), 2)
        return obs, info

    def step(self, action: Action) -> tuple[JSONValue, JSONValue, JSONValue, JSONValue, JSONValue]:
        obs, reward, terminated, truncated, info = self._shaped(self._call("step", action=action_to_wire(action)), 5)
        return obs, reward, terminated, truncated, info

    def get_state(self) -> JSONValue:
        return self._call("get_state")

    def set_state(self, state: JSONValue) -> None:
        self._call("set_state", state=state)

    def action_candidates(self) -> list[str]:
        out = self._call("action_candidates")
        return [str(c) for c in out] if isinstance(out, list) else []

    def render(self) -> str:
        return str(self._call("render"))

    def close(self) -> None:
        """End the worker (its env's ``close`` is not waited for: the session's uid goes next)."""
        self.kill()

    # ---------------------------------------------------------------- machinery
    def kill(self) -> None:
        """Kill the worker's process group now (idempotent)."""
        self._lost = self._lost or "the session was closed"
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self._proc.kill()
        for f in (self._proc.stdin, self._proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def _shaped(self, value: JSONValue, n: int) -> list[JSONValue]:
        if not isinstance(value, list) or len(value) != n:
            raise self._fail(f"the env worker answered a malformed result (expected a list of {n})")
        return value

    def _fail(self, reason: str) -> SessionLost:
        """Kill the worker and say why the session is lost (every later call says so too)."""
        tail = b"".join(self._tail).decode(errors="replace").strip()
        if self._proc.poll() is not None and self._proc.returncode:
            reason += f" (exit status {self._proc.returncode})"
        if tail:
            reason += f"; its last output: {tail[-500:]}"
        self.kill()
        self._lost = reason
        return SessionLost(reason)

    def _call(self, op: str, **args: object) -> JSONValue:
        if self._lost:
            raise SessionLost(self._lost)
        deadline = time.monotonic() + self.timeout_s
        body = json.dumps({"op": op, "args": args}).encode()
        if len(body) > MAX_FRAME_BYTES:
            raise ValueError(f"the {op} call is {len(body)} bytes, over the cap of {MAX_FRAME_BYTES} bytes")
        self._write(_HEADER.pack(len(body)) + body, deadline, op)
        (n,) = _HEADER.unpack(self._read(_HEADER.size, deadline, op))
        if n > MAX_FRAME_BYTES:
            raise self._fail(f"the env worker's answer to {op} is {n} bytes, over the cap of {MAX_FRAME_BYTES}")
        try:
            answer = json.loads(self._read(n, deadline, op))
        except (ValueError, RecursionError):
            raise self._fail(f"the env worker answered {op} with something else than JSON") from None
        if not isinstance(answer, dict) or not ({"result", "error"} & answer.keys()):
            raise self._fail(f"the env worker answered {op} with a malformed frame")
        if "error" in answer:
            raise _rebuild(answer["error"])
        return answer["result"]

    def _wait(self, fd: int, event: int, deadline: float, op: str) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._fail(f"the env worker did not answer {op} within {self.timeout_s:g} s")
        poller = select.poll()
        poller.register(fd, event)
        poller.poll(min(remaining, 1.0) * 1000)

    def _write(self, data: bytes, deadline: float, op: str) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._in, view[: 1 << 20]) :]
            except BlockingIOError:
                self._wait(self._in, select.POLLOUT, deadline, op)
            except (BrokenPipeError, OSError):
                raise self._fail(f"the env worker died before {op}") from None

    def _read(self, n: int, deadline: float, op: str) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = os.read(self._out, min(n - len(buf), 1 << 20))
            except BlockingIOError:
                self._wait(self._out, select.POLLIN, deadline, op)
                continue
            except OSError:
                chunk = b""
            if not chunk:
                try:
                    self._proc.wait(1)
                except subprocess.TimeoutExpired:
                    pass
                raise self._fail(f"the env worker died during {op}")
            buf += chunk
        return bytes(buf)

    def _drain_stderr(self) -> None:
        """Keep the last bytes of the worker's stderr (for the error of a worker that died)."""
        f, size = self._proc.stderr, 0
        while f is not None:
            try:
                chunk = f.read1(4096) if isinstance(f, io.BufferedIOBase) else f.read(4096)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            self._tail.append(chunk)
            size += len(chunk)
            while size > _STDERR_TAIL and len(self._tail) > 1:
                size -= len(self._tail.popleft())
        if f is not None:
            f.close()
