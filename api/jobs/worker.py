"""The job worker: ``python -m rockroll.api.jobs.worker``, one process per job (issue 13 item 4).

The control plane starts it (:mod:`rockroll.api.jobs.process`) in the owner's job directory, with a
scrubbed environment and, where it can, as an unprivileged user. It reads one ``start`` message, runs
the job kind (:data:`rockroll.api.jobs.kinds.KINDS`) with a :class:`WorkerContext`, and ends with one
``done``, ``cancelled`` or ``failed`` message (the wire: :mod:`rockroll.api.jobs.protocol`).

What it cannot do: open the server's database, read its tokens or settings (none are passed), or run
an env or a model's code here: ``ctx.open_session`` asks the server, which opens the session in one of
its sandboxes for the job's owner and relays each call (:class:`SessionProxy`), and a code reward gets
its sandboxes from the server too (:mod:`rockroll.api.jobs.worker_sandboxes`). When the server goes away (its end
of stdin closes) the worker exits at once.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import traceback
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, BinaryIO

from rockroll.agentrl.sources.kinds import CallableSource, EnvSource
from rockroll.api.jobs.kinds import KINDS
from rockroll.api.jobs.protocol import MAX_LINE, Cancelled, encode, error_from_dict
from rockroll.api.jobs.worker_sandboxes import RemoteSandboxes
from rockroll.envs.action_wire import tools_from_wire
from rockroll.envs.json_types import JSONObject, JSONValue
from rockroll.envs.tools import Action, Tool, action_to_wire
from rockroll.sandbox.provider import set_default_provider

__all__ = ["WorkerContext", "SessionProxy", "Channel", "main"]

#: exit status when the server's end of the channel closed
SERVER_GONE = 75


class Channel:
    """Messages to and from the server; :meth:`call` is one request and its reply (thread-safe)."""

    def __init__(self, rfile: BinaryIO, wfile: BinaryIO) -> None:
        self._r, self._w = rfile, wfile
        self._wlock = threading.Lock()
        self._pending: dict[int, Future[JSONObject]] = {}
        self._ids = itertools.count(1)
        self.cancel = threading.Event()
        self.start: Future[JSONObject] = Future()
        threading.Thread(target=self._read, name="job-channel", daemon=True).start()

    def send(self, msg: dict[str, object]) -> None:
        data = encode(msg)
        with self._wlock:
            self._w.write(data)
            self._w.flush()

    def call(self, op: str, **args: object) -> JSONValue:
        fut: Future[JSONObject] = Future()
        rid = next(self._ids)
        self._pending[rid] = fut
        self.send({"t": "rpc", "id": rid, "op": op, "args": args})
        reply = fut.result()
        if "error" in reply:
            raise error_from_dict(reply["error"])
        return reply.get("result")

    def _read(self) -> None:
        while line := self._r.readline(MAX_LINE + 1):
            msg = json.loads(line)
            t = msg.get("t")
            if t == "reply":
                rid = msg.get("id")
                fut = self._pending.pop(rid, None) if isinstance(rid, int) else None
                if fut is not None:
                    fut.set_result(msg)
            elif t == "cancel":
                self.cancel.set()
            elif t == "start" and not self.start.done():
                self.start.set_result(msg)
        os._exit(SERVER_GONE)  # the server is gone: nobody would see what this job does


class SessionProxy:
    """An env session of the server's sandboxes, driven from here (the surface of a ``RemoteSession``)."""

    def __init__(self, channel: Channel, info: JSONValue) -> None:
        if not isinstance(info, dict) or not isinstance(info.get("sid"), str):
            raise TypeError(f"the server answered a session open with {info!r:.200}")
        self._channel = channel
        self.sid = str(info["sid"])
        self.sandbox_id = str(info.get("sandbox_id", ""))
        self.session_id = str(info.get("session_id", ""))
        self.env_id = str(info.get("env_id", ""))
        self.spec_id = self.env_id
        self._system_prompt = str(info.get("system_prompt", ""))
        self._tools = tools_from_wire(info.get("tools"))
        self.closed = False

    def __repr__(self) -> str:
        return f"SessionProxy({self.env_id!r}, sandbox={self.sandbox_id}, session={self.session_id})"

    def _call(self, method: str, **args: object) -> Any:
        return self._channel.call("call", sid=self.sid, method=method, args=args)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = self._call("reset", seed=seed, options=options)
        return obs, info

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self._call("step", action=action_to_wire(action))
        return obs, reward, terminated, truncated, info

    def get_state(self) -> dict[str, Any]:
        return self._call("get_state")

    def set_state(self, state: dict[str, Any]) -> None:
        self._call("set_state", state=state)

    def system_prompt(self) -> str:
        return self._system_prompt

    @property
    def tools(self) -> tuple[Tool, ...]:
        return self._tools

    def action_candidates(self) -> list[str]:
        return self._call("action_candidates")

    def render(self) -> str:
        return self._call("render")

    def fork(self) -> SessionProxy:
        return SessionProxy(self._channel, self._call("fork"))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._call("close")
        except Exception:  # noqa: BLE001 - closing a lost session is not an error
            pass

    def __enter__(self) -> SessionProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WorkerContext:
    """What a running job sees: its config, and calls to log, report, check cancellation and open envs."""

    def __init__(self, channel: Channel, job_id: str, config: dict[str, Any]) -> None:
        self.channel = channel
        self.job_id = job_id
        self.config = config

    @property
    def cancelled(self) -> bool:
        return self.channel.cancel.is_set()

    def check(self) -> None:
        """Raise :class:`Cancelled` when the job was cancelled."""
        if self.cancelled:
            raise Cancelled()

    def log(self, line: str) -> None:
        self.channel.send({"t": "log", "line": str(line)})

    def report(self, *, progress: float | None = None, metrics: Mapping[str, object] | None = None) -> None:
        self.channel.send({"t": "report", "progress": progress, "metrics": None if metrics is None else dict(metrics)})

    def open_session(self, env: str, kwargs: Mapping[str, object]) -> SessionProxy:
        """An env session in a sandbox of the server, for the job's owner."""
        return SessionProxy(self.channel, self.channel.call("open", env=env, kwargs=dict(kwargs or {})))

    def env_source(self) -> EnvSource:
        """Where a trainer's rollouts get their envs: :meth:`open_session`."""
        return CallableSource(self.open_session)


def main() -> None:
    """Run the job the server sends, then exit (see the module docstring)."""
    proto = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # what the job prints goes to stderr: the worker log, never into the channel
    channel = Channel(sys.stdin.buffer, proto)
    set_default_provider(RemoteSandboxes(channel))  # code rewards run in the server's sandboxes, never here
    start = channel.start.result(timeout=120)
    status = 0
    try:
        config = start["config"]
        if not isinstance(config, dict):
            raise TypeError(f"a job's config is a mapping, got {type(config).__name__}")
        ctx = WorkerContext(channel, str(start["job_id"]), config)
        metrics = KINDS[str(start["kind"])](ctx)
        channel.send({"t": "cancelled" if ctx.cancelled else "done", "metrics": dict(metrics or {})})
    except Cancelled:
        channel.send({"t": "cancelled"})
    except BaseException as e:  # noqa: BLE001 - a job's failure is reported, never raised
        traceback.print_exc()
        channel.send({"t": "failed", "error": f"{type(e).__name__}: {e}"})
        status = 1
    finally:
        sys.stderr.flush()
    os._exit(status)  # threads of the job (engines, env managers) must not keep the process alive


if __name__ == "__main__":
    main()
