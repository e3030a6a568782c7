"""The control plane's side of a standalone node agent: open, call and close sessions on it.

:class:`NodeAdmin` calls the agent's admin routes (``/v1/node/admin/...``, see
:mod:`rockroll.sandbox.node.host`) with the cluster secret; :class:`NodeSession` is one session on
that agent, an :class:`~rockroll.sandbox.session.EnvSession` like a
:class:`~rockroll.sandbox.session.RemoteSession`, so the
control plane's session registry and its proxied per-step routes serve it unchanged. Its steps go
through the agent's step log like the data plane's (numbered next).

Errors come back as the exceptions the control plane already maps: an unreachable agent, or one
that no longer holds the session, is :class:`~rockroll.sandbox.errors.SandboxLost` (410). Once the
control plane has declared the agent lost (:meth:`NodeAdmin.lose`: it died, went silent, or its Ray
node left), every session opened through that admin is lost for good: its calls raise
:class:`NodeLost` without a request and :attr:`NodeSession.lost_reason` says why (the control plane
answers ``410 session_lost``). An agent that comes back registers anew and gets a new admin.

Threat model: the agent is part of the deployment (it holds the secret); its answers are JSON.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import httpx

from rockroll.envhub.errors import UnknownEnvError
from rockroll.envs.action_wire import tools_from_wire
from rockroll.envs.errors import ActionTypeError, EnvError, ResetNeeded
from rockroll.envs.tools import Action, Tool, action_to_wire
from rockroll.sandbox import errors as sb
from rockroll.sandbox.server.wire import OpenedSession

__all__ = ["NodeAdmin", "NodeSession", "NodeLost"]


class NodeLost(sb.SandboxLost):
    """The node agent holding the session was declared lost; the session's env state went with it."""

    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__("", reason)
        self.node_id = node_id


class NodeAdmin:
    """HTTP calls to one agent's admin routes (thread-safe: httpx's client is)."""

    def __init__(self, endpoint: str, secret: str, *, node_id: str = "", timeout_s: float = 120.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.node_id = node_id
        self.lost = ""  # why the agent was declared lost ('' while it is not)
        self._http = httpx.Client(
            base_url=self.endpoint + "/v1/node/admin",
            headers={"Authorization": f"Bearer {secret}"},
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
        )

    def close(self) -> None:
        self._http.close()

    def lose(self, reason: str) -> None:
        """Declare the agent lost: its sessions answer :class:`NodeLost` from now on (see the module docstring)."""
        self.lost = self.lost or reason

    def request(
        self, method: str, path: str, body: dict[str, object] | None = None, *, timeout_s: float | None = None
    ) -> Any:
        if self.lost:
            raise NodeLost(self.node_id, self.lost)
        try:
            timeout = httpx.USE_CLIENT_DEFAULT if timeout_s is None else timeout_s
            resp = self._http.request(method, path, json=body, timeout=timeout)
        except httpx.HTTPError as e:
            raise sb.SandboxLost("", f"node agent {self.endpoint} unreachable: {e}") from e
        if resp.status_code == 204:
            return None
        try:
            payload = resp.json()
        except ValueError as e:
            raise sb.RemoteError(
                "BadResponse", f"node agent answered HTTP {resp.status_code}: {resp.text[:200]}"
            ) from e
        if resp.status_code >= 400 or (isinstance(payload, dict) and "error" in payload):
            raise _to_exception(payload.get("error") or {}, resp.status_code)
        return payload

    def session_ids(self) -> set[str]:
        """The ids of the sessions the agent holds now."""
        return {str(i) for i in self.request("GET", "/sessions", timeout_s=10.0)["session_ids"]}

    def open(self, session_id: str, env: str, kwargs: dict[str, object], owner: str) -> NodeSession:
        info = self.request(
            "POST", "/sessions", {"session_id": session_id, "env": env, "kwargs": kwargs, "owner": owner}
        )
        return NodeSession(self, info)


def _to_exception(err: Mapping[str, Any], status: int) -> Exception:
    code, message = str(err.get("code", "")), str(err.get("message", f"HTTP {status}"))
    details = err.get("details") or {}
    if code in ("sandbox_lost", "session_not_found"):
        return sb.SandboxLost(str(details.get("sandbox_id", "")), message)
    if code == "reset_needed":
        return ResetNeeded(message)
    if code == "env_not_found":
        return UnknownEnvError(str(details.get("env_id", "")), [])
    if code == "capacity_reached":
        return sb.CapacityError(
            int(details.get("active", 0)), int(details.get("limit", 0)), str(details.get("what", ""))
        )
    if code == "sandbox_timeout":
        return sb.SandboxTimeout(message)
    if code in ("validation_error", "invalid_env_input") and "field" in details:  # a malformed action
        return ActionTypeError(None, field=str(details["field"]), reason=message)
    if status in (400, 409, 422):
        return EnvError(message)
    return sb.SandboxError(message)


class NodeSession:
    """One session on a standalone agent (see the module docstring)."""

    def __init__(self, admin: NodeAdmin, info: OpenedSession, *, ask_tools: bool = False) -> None:
        """``ask_tools``: the tools are not in ``info`` (a session adopted from its row): ask the agent on first use."""
        self.admin = admin
        self.session_id: str = info["session_id"]  # the control plane's id is the agent's too
        self.sandbox_id: str = info.get("sandbox_id", "")
        self.env_id: str = info.get("env_id", "")
        self._system_prompt: str = info.get("system_prompt", "")
        self._tools = None if ask_tools else tools_from_wire(info.get("tools"))
        self.closed = False

    @property
    def lost_reason(self) -> str:
        """Why the agent holding this session was declared lost ('' while it serves)."""
        return self.admin.lost

    def _call(self, op: str, **args: object) -> Any:
        if self.closed:
            raise sb.SessionNotFound(self.session_id)
        return self.admin.request("POST", f"/sessions/{self.session_id}/call", {"op": op, **args})

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        out = self._call("reset", seed=seed, options=options)
        return out["observation"], out["info"]

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        out = self._call("step", action=action_to_wire(action))
        return out["observation"], out["reward"], out["terminated"], out["truncated"], out["info"]

    def get_state(self) -> dict[str, Any]:
        return self._call("state")["state"]

    def set_state(self, state: dict[str, Any]) -> None:
        self._call("set_state", state=state)

    def action_candidates(self) -> list[str]:
        return list(self._call("actions")["actions"])

    def idle_s(self) -> float:
        """Seconds since the session was last used at the agent (its data-plane steps included)."""
        return float(self._call("idle")["idle_s"])

    def system_prompt(self) -> str:
        return self._system_prompt

    @property
    def tools(self) -> tuple[Tool, ...]:
        if self._tools is None:
            try:
                self._tools = tools_from_wire(self._call("tools").get("tools"))
            except sb.SandboxError:  # the agent cannot say now: none shown, asked again next time
                return ()
        return self._tools

    def render(self) -> str:
        return ""

    def fork(self) -> NodeSession:
        info = self._call("fork", new_session_id=f"se-{secrets.token_hex(8)}")
        return NodeSession(self.admin, info)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.admin.lost:
            return  # nothing left to close: the agent, and its sandboxes, are gone
        try:
            self.admin.request("DELETE", f"/sessions/{self.session_id}")
        except sb.SandboxError:
            pass  # the agent is gone, or no longer holds it: nothing left to close
