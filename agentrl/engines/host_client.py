"""The client end of an engine host process (see :mod:`rockroll.agentrl.engines.host_protocol`).

:class:`HostProcess` starts the host (``python -m ...`` with another venv's python), writes
request frames to its stdin and resolves one :class:`concurrent.futures.Future` per request from
the replies a reader thread takes off its stdout. Futures, not asyncio objects: an engine outlives
event loops (tests and scripts call ``asyncio.run`` many times), and ``asyncio.wrap_future``
awaits one from any loop. The host's stderr goes to a log file whose tail each error quotes.

When the host exits (killed, out of memory, a broken engine) every waiting request fails with
:class:`~rockroll.agentrl.engines.base.EngineDeadError`, an infra failure; the engine that owns
the process decides whether to start a new one.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from rockroll.agentrl.engines.base import EngineDeadError, EngineError
from rockroll.agentrl.engines.host_protocol import ProtocolError, read_frame, write_frame

__all__ = ["HostProcess"]


class HostProcess:
    """One host process and its pending requests.

    Args:
        argv: the command (``[python, "-m", module, config_json]``).
        env: its environment.
        log_path: where its stderr goes.
        name: used in messages ("vllm host").
    """

    def __init__(self, argv: list[str], *, env: dict[str, str], log_path: str | Path, name: str) -> None:
        self.argv = argv
        self.env = env
        self.log_path = Path(log_path)
        self.name = name
        self.facts: dict[str, Any] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._dead: str | None = None
        self._exited = threading.Event()

    # ------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float) -> dict[str, Any]:
        """Start the process and wait for its ready message (its facts: device, versions ...)."""
        ready: Future[dict[str, Any]] = Future()
        self._pending[0] = ready
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.argv, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
            )
        threading.Thread(target=self._read, daemon=True, name=f"{self.name} replies").start()
        try:
            self.facts = ready.result(timeout=timeout_s)
        except FutureTimeout as e:
            self.kill()
            raise EngineError(f"the {self.name} did not start within {timeout_s:.0f} s; log: {self.log_tail()}") from e
        return self.facts

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._dead is None and self._proc.poll() is None

    @property
    def in_flight(self) -> int:
        """Requests sent and not answered yet."""
        with self._lock:
            return sum(1 for msg_id in self._pending if msg_id)

    def wait_exited(self, timeout_s: float) -> bool:
        """Wait until the process has exited and its requests have failed; False on timeout."""
        return self._exited.wait(timeout_s)

    def kill(self) -> None:
        """Kill the process now (its requests fail with :class:`EngineDeadError`)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the host to shut down; kill it if it has not exited within ``timeout_s``."""
        if self._proc is None:
            return
        if self.alive:
            try:
                self.call({"op": "shutdown"}).result(timeout=timeout_s)
            except Exception:  # noqa: BLE001 - shutting down: a dead or slow host is killed below
                pass
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()

    def log_tail(self, chars: int = 3000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - chars))
                return f.read().decode(errors="replace")
        except OSError:
            return "(no log)"

    # ------------------------------------------------------------- requests
    def call(self, message: dict[str, Any], blob: bytes = b"") -> Future[dict[str, Any]]:
        """Send one request; the future holds its ``result`` dict or raises :class:`EngineError`."""
        fut: Future[dict[str, Any]] = Future()
        with self._lock:
            if not self.alive or self._proc is None or self._proc.stdin is None:
                raise self.dead_error()
            msg_id = next(self._ids)
            self._pending[msg_id] = fut
            try:
                write_frame(self._proc.stdin, {**message, "id": msg_id}, blob)  # type: ignore[arg-type]
            except (BrokenPipeError, OSError, ValueError) as e:
                self._pending.pop(msg_id, None)
                raise self.dead_error() from e
        return fut

    def dead_error(self) -> EngineDeadError:
        """The error that requests to this dead host fail with (exit code and log tail)."""
        code = self._proc.poll() if self._proc is not None else None
        reason = self._dead or f"exit code {code}"
        return EngineDeadError(f"the {self.name} is dead ({reason}); log tail: {self.log_tail(1500)}")

    def _read(self) -> None:
        proc = self._proc
        if proc is None or proc.stdout is None:  # start() sets both before this thread runs
            return
        try:
            while (frame := read_frame(proc.stdout)) is not None:  # type: ignore[arg-type]
                self._resolve(frame[0])
        except (ProtocolError, OSError, ValueError) as e:
            self._dead = f"reply stream broke: {e}"
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with self._lock:
            self._dead = self._dead or f"exit code {proc.returncode}"
            pending, self._pending = self._pending, {}
        error = self.dead_error()
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(error)
        self._exited.set()

    def _resolve(self, reply: dict[str, Any]) -> None:
        with self._lock:
            fut = self._pending.pop(int(reply.get("id", -1)), None)
        if fut is None or fut.done():
            return
        if reply.get("ok"):
            fut.set_result(reply.get("result") or {})
        elif reply.get("kind") == "engine":
            fut.set_exception(EngineDeadError(f"the {self.name}: {reply.get('error')}"))
        else:
            fut.set_exception(EngineError(f"the {self.name} refused the request: {reply.get('error')}"))
