"""``RemoteEnv``: the text-env contract over HTTP, a ``gymnasium.Env`` backed by an API session.

``RemoteEnv(client, "FrozenLake-v0", is_slippery=False)`` opens a session placed by the control
plane. With the default ``transport="auto"`` the calls of a playing agent (reset, step, state,
actions) go straight to the node agent that serves the session, over one WebSocket with a signed
session token (:class:`rockroll.sandbox.node.client.DataPlaneSession`; the control plane is off the
step path), when the control plane offers a ``data_plane`` and the agent answers; otherwise, and
with ``transport="http"``, each call is one request to the session routes; with ``transport="ws"``
they go over the control plane's own WebSocket (``/v1/sessions/{id}/ws``). ``set_state``, ``fork``
and ``close`` always go through the control plane. A step takes the agent's text or a turn with tool calls
(:class:`~rockroll.envs.tools.ToolAction`); :attr:`RemoteEnv.tools` are the env's tools, as the control plane
listed them. ``gymnasium.make("rockroll-remote/FrozenLake-v0", client=client)`` works after
:func:`register_gymnasium` (called on import of this module).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import gymnasium as gym

import rockroll.envhub as envhub
from rockroll.client.errors import ApiClientError, error_for
from rockroll.client.responses import DataPlane, DataPlaneToken
from rockroll.client.session_socket import SessionSocket
from rockroll.client.types import ResetResult, SessionInfo, SessionOpened, StepResult
from rockroll.envs.action_wire import tools_from_wire
from rockroll.envs.core import TextSpace
from rockroll.envs.errors import ActionTypeError
from rockroll.envs.tools import Action, Tool, ToolAction, action_to_wire
from rockroll.sandbox.node.client import DataPlaneError, DataPlaneSession

__all__ = ["RemoteEnv", "SessionClient", "register_gymnasium", "GYM_REMOTE_NAMESPACE"]

GYM_REMOTE_NAMESPACE = "rockroll-remote"

P = TypeVar("P")
R = TypeVar("R")


class SessionClient(Protocol):
    """The session routes :class:`RemoteEnv` calls; :class:`rockroll.client.sdk.Client` has them.

    A protocol rather than an import of the client, so that the client can import this module
    (``Client.env``) without an import cycle.
    """

    @property
    def url(self) -> str: ...
    @property
    def token(self) -> str | None: ...

    def create_session(
        self,
        env: str,
        kwargs: Mapping[str, object] | None = None,
        *,
        group: str = "",
        avoid_nodes: list[str] | None = None,
    ) -> SessionOpened: ...
    def get_session(self, session_id: str) -> SessionInfo: ...
    def reset(
        self, session_id: str, seed: int | None = None, options: Mapping[str, object] | None = None
    ) -> ResetResult: ...
    def step(self, session_id: str, action: Action) -> StepResult: ...
    def actions(self, session_id: str) -> list[str]: ...
    def get_state(self, session_id: str) -> dict[str, Any]: ...
    def set_state(self, session_id: str, state: Mapping[str, object]) -> None: ...
    def fork(self, session_id: str) -> SessionOpened: ...
    def close_session(self, session_id: str) -> None: ...
    def session_token(self, session_id: str) -> DataPlaneToken: ...


class RemoteEnv(gym.Env[str, str]):
    """A remote env session (see the module docstring). ``closed`` after :meth:`close`.

    An :class:`~rockroll.sandbox.session.EnvSession` (``session_id``, ``env_id``, ``sandbox_id``, ``closed``,
    ``render``, ``fork``); ``session_id`` is the control plane's id (its routes and the data plane take it).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}

    def __init__(
        self,
        client: SessionClient,
        env: str,
        *,
        session_id: str | None = None,
        transport: str = "auto",
        group: str = "",
        avoid_nodes: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> None:
        if transport not in ("auto", "http", "ws"):
            raise ValueError(f"transport must be 'auto', 'http' or 'ws', got {transport!r}")
        self.client = client
        self.env_id = env
        self.kwargs = kwargs
        info: SessionOpened | SessionInfo
        offered: DataPlane | None = None  # where to step it directly (an open's answer only)
        if session_id is None:
            info = client.create_session(env, kwargs, group=group, avoid_nodes=list(avoid_nodes) or None)
            offered = info.get("data_plane")
        else:
            info = client.get_session(session_id)
        self._system_prompt = info.get("system_prompt", "")
        self._tools = tools_from_wire(info.get("tools"))
        self.sandbox_id: str = info["sandbox_id"]
        self.node: str = offered["node"] if offered else ""  # the node agent serving it, if any
        self.session_id: str = info["id"]
        self.observation_space = TextSpace()
        self.action_space = TextSpace()
        self.closed = False
        self._socket: SessionSocket | DataPlaneSession | None = None
        if transport == "ws":
            self._socket = SessionSocket(client.url, client.token, self.session_id)
        elif transport == "auto":
            self._socket = self._direct(offered)
        self.transport = "direct" if isinstance(self._socket, DataPlaneSession) else transport

    def _direct(self, dp: DataPlane | None) -> DataPlaneSession | None:
        """A socket to the session's node agent, or None when the control plane offers none or it cannot be reached."""
        if dp is None:
            try:
                dp = self.client.session_token(self.session_id)["data_plane"]
            except (ApiClientError, AttributeError):
                return None
        try:
            timeout_s = float(getattr(self.client, "timeout_s", 120.0))  # the client's bound holds at the agent too
            return DataPlaneSession(dp["endpoint"], self.session_id, dp["token"], refresh=self._fresh_token,
                                    timeout_s=timeout_s)  # fmt: skip
        except DataPlaneError:  # e.g. an in-process test client's endpoint: fall back to the session routes
            return None

    @staticmethod
    def _call_direct(fn: Callable[[P], R], arg: P) -> R:
        """``fn(arg)`` on a socket; a data-plane error raised as the SDK's ``ApiClientError`` (same status and code)."""
        try:
            return fn(arg)
        except DataPlaneError as e:
            raise error_for(e.status, {"error": {"code": e.code, "message": e.message, "details": e.details}}) from e

    def _fresh_token(self) -> str:
        return self.client.session_token(self.session_id)["data_plane"]["token"]

    def __repr__(self) -> str:
        return f"RemoteEnv({self.env_id!r}, session={self.session_id}, sandbox={self.sandbox_id})"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode."""
        if self._socket is not None:
            answer = self._call_direct(self._socket.call, {"op": "reset", "seed": seed, "options": options})
            return answer["observation"], answer["info"]
        out = self.client.reset(self.session_id, seed=seed, options=options)
        return out["observation"], out["info"]

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play the agent's text or a turn with tool calls. Never resent: a connection that drops after sending
        raises, as the server may have played it (the rollout layer then replays the episode on a fresh session)."""
        if not isinstance(action, (str, ToolAction)):
            raise ActionTypeError(action)
        out: StepResult | dict[str, Any]
        if isinstance(self._socket, DataPlaneSession):
            out = self._call_direct(self._socket.step_raw, action)
        elif self._socket is not None:
            out = self._socket.call({"op": "step", "action": action_to_wire(action)})
        else:
            out = self.client.step(self.session_id, action)
        return out["observation"], float(out["reward"]), bool(out["terminated"]), bool(out["truncated"]), out["info"]

    def system_prompt(self) -> str:
        return self._system_prompt

    @property
    def tools(self) -> tuple[Tool, ...]:
        return self._tools

    def action_candidates(self) -> list[str]:
        if self._socket is not None:
            return list(self._call_direct(self._socket.call, {"op": "actions"})["actions"])
        return list(self.client.actions(self.session_id))

    def get_state(self) -> dict[str, Any]:
        if self._socket is not None:
            return self._call_direct(self._socket.call, {"op": "state"})["state"]
        return self.client.get_state(self.session_id)

    def set_state(self, state: dict[str, Any]) -> None:
        self.client.set_state(self.session_id, state)

    def fork(self) -> RemoteEnv:
        """A new remote session that continues from this one's current state."""
        info = self.client.fork(self.session_id)
        return RemoteEnv(self.client, self.env_id, session_id=info["id"], **self.kwargs)

    def render(self) -> str:
        """ "": the API renders no observation on demand."""
        return ""

    def close(self) -> None:
        """Close the session (idempotent)."""
        if not self.closed:
            self.closed = True
            if self._socket is not None:
                self._socket.close()
            self.client.close_session(self.session_id)


def _make_remote(env_id: str) -> Callable[..., RemoteEnv]:
    def build(client: SessionClient, render_mode: str | None = None, **kwargs: Any) -> RemoteEnv:
        return RemoteEnv(client, env_id, **kwargs)

    return build


def register_gymnasium(env_ids: list[str] | None = None) -> None:
    """Register ``rockroll-remote/<id>`` for the built-in env ids (or ``env_ids``) with gymnasium."""
    if env_ids is None:
        env_ids = [s.id for s in envhub.list_envs()]
    for env_id in env_ids:
        gym_id = f"{GYM_REMOTE_NAMESPACE}/{env_id}"
        gym.registry.pop(gym_id, None)
        gym.register(id=gym_id, entry_point=_make_remote(env_id), disable_env_checker=True, order_enforce=False)


register_gymnasium()
