"""A standalone node agent: its own sandbox manager, the data plane, and admin routes for the control plane.

:class:`NodeHost` owns a :class:`~rockroll.sandbox.manager.SandboxManager` for this machine (warm
pool, health probes, restarts) and a :class:`~rockroll.sandbox.node.agent.NodeAgent` serving the
sessions it opens. Each owner's sessions get sandboxes of their own ,
as on the control plane (pool ``sessions-<hash of owner>``). The admin routes, for the control plane only (the cluster secret as
bearer token), are:

* ``POST /v1/node/admin/sessions`` ``{"session_id", "env", "kwargs", "owner"}`` -> the session's
  ``{"session_id", "sandbox_id", "env_id", "system_prompt", "tools"}`` (``tools``: the env's, as OpenAI
  function schemas);
* ``POST /v1/node/admin/sessions/{id}/call`` ``{"op": step | reset | state | set_state | actions
  | tools | fork | idle, ...}`` -> the call's answer (a proxied step takes the next sequence number;
  ``idle`` answers ``{"idle_s"}``, the seconds since the session was last used, for the control
  plane's idle reaper);
* ``DELETE /v1/node/admin/sessions/{id}``: an id not open (yet) is remembered, so an open of it under
  way (its control plane died mid-open and another replica gave it up) or arriving later is closed at
  once and answers 410;
* ``POST /v1/node/admin/revoked`` ``{"token_ids": [...]}``: revoked API tokens (their sessions'
  sockets are closed, their session tokens refused) -> ``{"closed": n}``.

Sandboxes live as long as the agent: the process backend is built with ``tie_to_parent``, so a
killed agent (even SIGKILL) takes its process sandboxes with it (:mod:`rockroll.sandbox.process`).

Threat model: admin routes trust the holder of the cluster secret (the control plane); data-plane
clients are untrusted and hold session tokens only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from rockroll.envs.action_wire import tools_to_wire
from rockroll.envs.json_types import JSONValue
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.node.agent import NodeAgent
from rockroll.sandbox.node.dataplane import bearer, json_response
from rockroll.sandbox.node.wire import NodeSessionNotFound, WireError, error_answer
from rockroll.sandbox.server.wire import OpenedSession
from rockroll.sandbox.session import RemoteSession

__all__ = ["NodeHost", "admin_routes", "SESSION_POOL"]

SESSION_POOL = "sessions"
#: ids of sessions closed before they were opened, remembered (newest first kept)
CLOSED_KEPT = 10_000
_ID = re.compile(r"^se-[0-9a-f]{4,64}$")


class NodeHost:
    """This machine's sandboxes and the agent serving their sessions (see the module docstring)."""

    def __init__(self, agent: NodeAgent, manager: SandboxManager, *, max_sessions_per_sandbox: int = 64) -> None:
        self.agent = agent
        self.manager = manager
        self.max_sessions_per_sandbox = max_sessions_per_sandbox
        self._lock = threading.Lock()
        self._opening: set[str] = set()
        self._closed: OrderedDict[str, float] = OrderedDict()  # ids closed before (or while) they were opened

    def open(self, session_id: JSONValue, env: JSONValue, kwargs: JSONValue, owner: JSONValue) -> OpenedSession:
        if not isinstance(session_id, str) or not _ID.match(session_id):
            raise WireError(422, "validation_error", "'session_id' must look like se-<hex>")
        if not isinstance(env, str) or not isinstance(kwargs, dict) or not isinstance(owner, str):
            raise WireError(422, "validation_error", "'env' and 'owner' are strings, 'kwargs' an object")
        with self._lock:
            if session_id in self.agent._sessions or session_id in self._opening:
                raise WireError(409, "conflict", f"session {session_id!r} is open here already")
            if session_id in self._closed:
                raise WireError(410, "session_not_found", f"session {session_id!r} was closed before it was opened")
            self._opening.add(session_id)
        try:
            spec = SandboxSpec(name=owner_pool(owner), max_sessions=self.max_sessions_per_sandbox)
            remote = self.manager.open_session(env, spec=spec, avoid=(), **kwargs)
            with self._lock:
                cancelled = session_id in self._closed
                if not cancelled:
                    answer = self._attach(session_id, owner, remote)
            if cancelled:  # its opener gave it up meanwhile (a control-plane replica died mid-open)
                remote.close()
                raise WireError(410, "session_not_found", f"session {session_id!r} was closed while it was opened")
            return answer
        finally:
            with self._lock:
                self._opening.discard(session_id)

    def _ids(self) -> list[str]:
        return list(self.agent._sessions)

    def _attach(self, session_id: str, owner: str, remote: RemoteSession) -> OpenedSession:
        self.agent.attach(session_id, owner, remote)
        return {"session_id": session_id, "sandbox_id": remote.sandbox_id, "env_id": remote.env_id,
                "system_prompt": remote.system_prompt(), "tools": tools_to_wire(remote.tools)}  # fmt: skip

    def call(self, session_id: str, msg: JSONValue) -> Mapping[str, object]:
        entry = self.agent.get(session_id)
        op = msg.get("op") if isinstance(msg, dict) else None
        if op == "set_state" and isinstance(msg, dict):
            state = msg.get("state")
            if not isinstance(state, dict):
                raise WireError(422, "validation_error", "'state' must be an object")
            with entry.log.lock:
                entry.remote.set_state(state)
            return {"ok": True}
        if op == "idle":  # the control plane's idle reaper: seconds since the session was last used here
            return {"idle_s": time.monotonic() - entry.last_used}
        if op == "fork" and isinstance(msg, dict):
            new_id = str(msg.get("new_session_id", ""))
            if not _ID.match(new_id):
                raise WireError(422, "validation_error", "'new_session_id' must look like se-<hex>")
            with entry.log.lock:
                forked = entry.remote.fork()
            return self._attach(new_id, entry.owner, forked)
        return self.agent.call(entry, msg)

    def close_session(self, session_id: str) -> None:
        """Close a session; one not open (yet) is remembered, so an open of it still under way or arriving
        later is closed at once instead of leaving a session nobody holds."""
        entry = self.agent.detach(session_id)
        if entry is None:
            with self._lock:
                self._closed[session_id] = time.monotonic()
                while len(self._closed) > CLOSED_KEPT:
                    self._closed.popitem(last=False)
                if session_id in self._opening:
                    return  # closed once its open ends
            raise NodeSessionNotFound(session_id)
        entry.remote.close()

    def drop_sessions(self) -> int:
        """Close every session held here (the control plane gave them up); return how many."""
        ids = self._ids()
        for sid in ids:
            try:
                self.close_session(sid)
            except Exception:  # noqa: BLE001 - one failed close stops no other
                pass
        return len(ids)

    def close(self) -> None:
        self.drop_sessions()
        self.manager.close(stop_sandboxes=True)


def owner_pool(owner: str) -> str:
    """The pool (and spec name) of ``owner``'s sandboxes: no two owners share one."""
    return f"{SESSION_POOL}-{hashlib.sha256(owner.encode()).hexdigest()[:16]}"


def admin_routes(host: NodeHost, secret: str) -> list[BaseRoute]:
    """The control plane's routes on ``host`` (see the module docstring)."""
    key = secret.encode()

    async def guarded(request: Request, fn: Callable[..., object], *args: str) -> Response:
        presented = bearer(request.headers.get("authorization", "")).encode()
        if not presented or not hmac.compare_digest(presented, key):
            body = {"code": "unauthorized", "message": "admin routes need the cluster secret", "details": {}}
            return json_response({"error": body}, 401)
        try:
            raw = await request.body()
            msg: JSONValue = json.loads(raw) if raw else {}
            out = await run_in_threadpool(fn, *args, msg)
        except Exception as e:  # noqa: BLE001 - answered as a typed error
            answer = error_answer(e if not isinstance(e, ValueError) or isinstance(e, WireError) else
                                  WireError(422, "validation_error", str(e)))  # fmt: skip
            return json_response({"error": answer["error"]}, answer["status"])
        return Response(status_code=204) if out is None else json_response(out)

    async def open_session(request: Request) -> Response:
        def run(msg: JSONValue) -> OpenedSession:
            if not isinstance(msg, dict):
                raise WireError(422, "validation_error", "the body must be an object")
            return host.open(msg.get("session_id", ""), msg.get("env"), msg.get("kwargs") or {}, msg.get("owner"))

        return await guarded(request, run)

    async def call_session(request: Request) -> Response:
        return await guarded(request, host.call, request.path_params["session_id"])

    async def close_session(request: Request) -> Response:
        return await guarded(request, lambda sid, _msg: host.close_session(sid), request.path_params["session_id"])

    async def held(request: Request) -> Response:
        return await guarded(request, lambda _msg: {"session_ids": host.agent.session_ids()})

    async def revoked(request: Request) -> Response:
        def run(msg: JSONValue) -> dict[str, int]:
            ids = msg.get("token_ids") if isinstance(msg, dict) else None
            if not isinstance(ids, list) or len(ids) > 100_000 or not all(isinstance(i, str) for i in ids):
                raise WireError(422, "validation_error", "'token_ids' must be a list of strings")
            return {"closed": host.agent.revoke(str(i) for i in ids)}

        return await guarded(request, run)

    prefix = "/v1/node/admin/sessions"
    return [
        Route("/v1/node/admin/revoked", revoked, methods=["POST"]),
        Route(prefix, open_session, methods=["POST"]),
        Route(prefix, held, methods=["GET"]),
        Route(f"{prefix}/{{session_id}}/call", call_session, methods=["POST"]),
        Route(f"{prefix}/{{session_id}}", close_session, methods=["DELETE"]),
    ]
