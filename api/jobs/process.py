"""One job's worker process, seen from the control plane (issue 13 item 4).

:class:`JobProcess` starts ``python -m rockroll.api.jobs.worker`` in the owner's job directory, in a
session of its own, with a scrubbed environment (:func:`worker_env`: no token, no settings, no
database URL) and as the identity :mod:`rockroll.api.jobs.identity` picked: as root with
``Settings.job_user`` and bubblewrap, that unprivileged user confined to the owner's folder (the
interpreter under a 0700 ``/root`` included); otherwise, said in the job's log, as that user directly
or as the server's user: still a separate process that holds none of the server's objects, every path
it is given confined to the owner's folder (:mod:`rockroll.api.jobs.paths`), but then the OS does not
stop it from reading what its user can read.

It then serves the worker's messages (:mod:`rockroll.api.jobs.protocol`): log lines and reports go to
the job record, env-session calls run here on sandboxes of the placement, as the job's owner (at most
:data:`MAX_SESSIONS` open at once), and the end message decides the job's state. A cancel is sent to the
worker (checked between steps); a worker still running ``grace_s`` later is killed, and so is one that
breaks the protocol. What the worker prints goes to its rotated ``worker.log``.
"""

from __future__ import annotations

import itertools
import logging
import os
import pwd
import signal
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rockroll.api.jobs.identity import WORKER, WorkerIdentity, worker_command, worker_env, worker_identity
from rockroll.api.jobs.logs import MAX_LINE_CHARS, JobLogs
from rockroll.api.jobs.protocol import (
    MAX_LINE,
    Metrics,
    ProtocolError,
    ProxiedSession,
    clean_metrics,
    decode,
    encode,
    error_to_dict,
)
from rockroll.api.jobs.sandboxes import OPS as SANDBOX_OPS
from rockroll.api.jobs.sandboxes import JobSandboxes
from rockroll.client.job_state import JobState
from rockroll.envs.action_wire import read_action, tools_to_wire
from rockroll.envs.json_types import JSONObject, JSONValue
from rockroll.sandbox.errors import CapacityError, SessionNotFound
from rockroll.sandbox.session import EnvSession

__all__ = ["JobProcess", "WorkerIdentity", "worker_identity", "worker_env", "MAX_SESSIONS", "WORKER"]

log = logging.getLogger("rockroll.api")
#: env sessions one job may hold open at once
MAX_SESSIONS = 256
_METHODS = {"reset", "step", "get_state", "set_state", "action_candidates", "render", "fork", "close"}


class JobProcess:
    """Runs one job in a worker process and serves it (see the module docstring)."""

    def __init__(
        self,
        job_id: str,
        kind: str,
        config: dict[str, Any],
        *,
        cwd: Path,
        logs: JobLogs,
        open_env: Callable[[str, dict[str, Any]], EnvSession],
        on_log: Callable[[str], None],
        on_report: Callable[[float | None, Metrics | None], None],
        identity: WorkerIdentity | None = None,
        grace_s: float = 60.0,
        sandboxes: JobSandboxes | None = None,
        min_isolation: str = "",
        keys: dict[str, str] | None = None,
    ) -> None:
        self.job_id, self.kind, self.config = job_id, kind, config
        self.cwd, self.logs, self.identity, self.grace_s = cwd, logs, identity, grace_s
        self.open_env, self.on_log, self.on_report = open_env, on_log, on_report
        self.sandboxes, self.min_isolation = sandboxes, min_isolation
        self.keys = dict(keys or {})  # the API keys its config may name (job_api_key_envs), the server's values
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid = 0
        self.opened = 0  # env sessions opened for the job (in the placement's sandboxes)
        self._wlock = threading.Lock()
        self._sessions: dict[str, EnvSession] = {}
        self._slock = threading.Lock()
        self._sids = itertools.count(1)
        self._cancelled = threading.Event()
        self._rpc = ThreadPoolExecutor(max_workers=32, thread_name_prefix=f"{job_id}-rpc")

    # ------------------------------------------------------------ control
    def run(self) -> tuple[JobState, str, Metrics | None]:
        """Start the worker, serve it until it exits; ``(state, error, metrics)``."""
        argv, as_user = worker_command(WORKER, self.identity, self.cwd)
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.cwd,
                env=worker_env(self.cwd, self.min_isolation, self.keys), start_new_session=True, **as_user,
            )  # fmt: skip
        except OSError as e:
            return JobState.FAILED, f"the job worker did not start: {e}", None
        self.pid = self.proc.pid
        if self.identity is not None:
            who = self.identity.describe()
        else:
            who = f"{_user_name(os.geteuid())} (uid {os.geteuid()}), the server's user, not confined"
        self.on_log(f"worker pid {self.pid} runs as {who}")
        pump = threading.Thread(target=self._pump_stderr, name=f"{self.job_id}-stderr", daemon=True)
        pump.start()
        self._send({"t": "start", "job_id": self.job_id, "kind": self.kind, "config": self.config})
        if self._cancelled.is_set():
            self._stop()
        end: JSONObject | None
        try:
            end = self._serve()
        except ProtocolError as e:
            self.kill()
            end = {
                "t": "failed",
                "error": f"the job worker broke the protocol ({e}) and was stopped",
            }
        finally:
            code = self._reap()
            self._rpc.shutdown(wait=True, cancel_futures=True)
            self._close_sessions()
            if self.sandboxes is not None:
                self.sandboxes.close()
            pump.join(timeout=10)
        if self.opened:
            self.on_log(f"the job played {self.opened} env sessions in this server's sandboxes")
        if self.sandboxes is not None and self.sandboxes.created:
            levels = ", ".join(sorted(self.sandboxes.levels))
            self.on_log(f"the job's code ran in {self.sandboxes.created} sandboxes of this server (isolation {levels})")
        return self._outcome(end, code)

    def cancel(self, grace_s: float | None = None) -> None:
        """Ask the worker to stop (it checks between steps); kill it if it still runs ``grace_s`` later."""
        if grace_s is not None:
            self.grace_s = min(self.grace_s, grace_s)
        self._cancelled.set()
        if self.proc is not None:
            self._stop()

    def _stop(self) -> None:
        self._send({"t": "cancel"})
        timer = threading.Timer(self.grace_s, self.kill)
        timer.daemon = True
        timer.start()

    def kill(self) -> None:
        """Kill the worker and everything it started (its process group)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass

    # ------------------------------------------------------------ serving
    def _serve(self) -> JSONObject | None:
        assert self.proc is not None and self.proc.stdout is not None  # noqa: S101 - set by run()
        end = None
        while line := self.proc.stdout.readline(MAX_LINE + 1):
            msg = decode(line)
            t = str(msg["t"])
            if t == "log":
                self.on_log(str(msg.get("line", ""))[:MAX_LINE_CHARS])
            elif t == "report":
                p = msg.get("progress")
                progress = float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else None
                self.on_report(progress, clean_metrics(msg.get("metrics")) or None)
            elif t == "rpc":
                self._rpc.submit(self._answer, msg)
            elif t in ("done", "cancelled", "failed"):
                end = msg
            else:
                raise ProtocolError(f"unknown message {t[:40]!r}")
        return end

    def _answer(self, msg: JSONObject) -> None:
        reply: dict[str, object]
        try:
            args = msg.get("args")
            reply = {"t": "reply", "id": msg.get("id"), "result": self._dispatch(msg.get("op"), args or {})}
        except Exception as e:  # noqa: BLE001 - every failure goes back to the worker as its error
            reply = {"t": "reply", "id": msg.get("id"), "error": error_to_dict(e)}
        self._send(reply)

    def _dispatch(self, op: JSONValue, args: JSONValue) -> object:
        if not isinstance(args, dict):
            raise TypeError("rpc args must be a mapping")
        if isinstance(op, str) and op in SANDBOX_OPS:
            if self.sandboxes is None:
                raise TypeError("this server gives jobs no sandboxes of their own")
            return self.sandboxes.handle(op, args)
        if op == "open":
            env, kwargs = args.get("env"), args.get("kwargs") or {}
            if not isinstance(env, str) or not isinstance(kwargs, dict):
                raise TypeError("open needs env (text) and kwargs (a mapping)")
            with self._slock:
                if len(self._sessions) >= MAX_SESSIONS:
                    raise CapacityError(len(self._sessions), MAX_SESSIONS, "env sessions of this job")
            session = self.open_env(env, dict(kwargs))
            self.opened += 1
            return self._keep(session)
        method, sid, call_args = args.get("method"), args.get("sid"), args.get("args") or {}
        if op != "call" or method not in _METHODS or not isinstance(call_args, dict):
            raise TypeError(f"unknown call {op!r} {method!r}")
        with self._slock:
            held = self._sessions.get(sid) if isinstance(sid, str) else None
        if held is None:
            raise SessionNotFound(str(sid))
        session = held
        if method == "fork":
            return self._keep(session.fork())
        if method == "close":
            with self._slock:
                self._sessions.pop(str(sid), None)
            session.close()
            return None
        played: dict[str, object] = dict(call_args)
        if method == "step" and "action" in played:  # the agent's text or a turn with tool calls, as JSON
            played["action"] = read_action(played["action"])
        play: Callable[..., object] = getattr(session, str(method))
        return play(**played)

    def _keep(self, session: EnvSession) -> ProxiedSession:
        sid = f"s{next(self._sids)}"
        with self._slock:
            self._sessions[sid] = session
        return {
            "sid": sid,
            "sandbox_id": session.sandbox_id,
            "session_id": session.session_id,
            "env_id": session.env_id,
            "system_prompt": session.system_prompt(),
            "tools": tools_to_wire(session.tools),
        }

    def _send(self, msg: dict[str, object]) -> None:
        proc = self.proc
        if proc is None or proc.stdin is None:
            return
        data = encode(msg)
        with self._wlock:
            try:
                proc.stdin.write(data)
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass  # the worker is gone; its end decides the job's state

    def _pump_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None  # noqa: S101 - set by run()
        fd = self.proc.stderr.fileno()
        while chunk := os.read(fd, 65536):
            self.logs.write(self.job_id, chunk, "worker.log")

    # ------------------------------------------------------------ ending
    def _reap(self) -> int:
        assert self.proc is not None  # noqa: S101 - set by run()
        if self.proc.stdin is not None:
            with self._wlock:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait(timeout=30)

    def _close_sessions(self) -> None:
        with self._slock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for s in sessions:
            try:
                s.close()
            except Exception:  # noqa: BLE001 - a lost session is not the job's failure
                pass

    def _outcome(self, end: JSONObject | None, code: int) -> tuple[JobState, str, Metrics | None]:
        t = end.get("t") if end else None
        metrics = clean_metrics(end.get("metrics")) if end else None
        if t == "done":
            return JobState.SUCCEEDED, "", metrics
        if t == "cancelled" or (t is None and self._cancelled.is_set()):
            return JobState.CANCELLED, "", metrics
        if t == "failed":
            return JobState.FAILED, str(end.get("error", "failed"))[:2000] if end else "failed", None
        tail = (self.logs.read(self.job_id, name="worker.log", tail_lines=5) or "").strip()[-800:]
        return JobState.FAILED, f"the job worker exited with status {code}" + (f": {tail}" if tail else ""), None


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
