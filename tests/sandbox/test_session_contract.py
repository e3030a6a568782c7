"""Every session handle satisfies :class:`rockroll.sandbox.session.EnvSession`, wherever its session runs.

The handles: a session in a sandbox of this manager (``RemoteSession``), one on a standalone node agent
(``NodeSession``), one driven from a job's worker process (the api's ``SessionProxy``) and one over the
control plane's HTTP routes (the client's ``RemoteEnv``). The control plane's live sessions hold one of the
first two (``LiveSession.remote`` is typed ``EnvSession``).

Built without a server: the handles only talk to their host on a call. ``isinstance`` with a
runtime-checkable protocol checks names only, so each method's signature is compared with the protocol's
too: the same parameters (names, kinds, defaults) with the same annotations, and the same return type
(``fork`` returns a handle of the same kind).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import pytest

import rockroll.envhub as hub
from rockroll.api.jobs.worker import SessionProxy
from rockroll.api.sessions.reaper import LiveSession
from rockroll.client.remote_env import RemoteEnv
from rockroll.envs import TextEnvProtocol
from rockroll.sandbox.client import SandboxClient
from rockroll.sandbox.node.client import DataPlaneSession
from rockroll.sandbox.node.remote import NodeAdmin, NodeSession
from rockroll.sandbox.session import EnvSession, RemoteSession

INFO = {"session_id": "s1", "env_id": "FrozenLake-v0", "sandbox_id": "sb-1", "system_prompt": "rules"}
HANDLES = (RemoteSession, NodeSession, SessionProxy, RemoteEnv)
METHODS = sorted(
    name for name, member in vars(EnvSession).items() if callable(member) and not name.startswith("_")
) + sorted(name for name, member in vars(TextEnvProtocol).items() if callable(member) and not name.startswith("_"))


class Host:
    id = "sb-1"
    generation = 0
    deleted = False

    def report_failure(self) -> None:
        pass

    def session_closed(self) -> None:
        pass

    def attach_session(self, info: dict[str, Any]) -> RemoteSession:
        raise NotImplementedError


class Routes:
    """The session routes a :class:`RemoteEnv` reads at construction (``get_session`` of an open session)."""

    url = "http://127.0.0.1:9"
    token = None

    def get_session(self, session_id: str) -> dict[str, Any]:
        return {"id": session_id, "owner": "alice", "env": "FrozenLake-v0", "sandbox_id": "sb-1", "steps": 0,
                "created_at": 0.0, "system_prompt": "rules"}  # fmt: skip

    def close_session(self, session_id: str) -> None:
        pass


def _handles(tmp_path: Any, admin: NodeAdmin) -> list[EnvSession]:
    return [
        RemoteSession(Host(), INFO, SandboxClient(str(tmp_path / "no.sock"), sandbox_id="sb-1")),
        NodeSession(admin, INFO),
        SessionProxy(object(), {"sid": "j1", **INFO}),  # its channel is used on a call only
        RemoteEnv(Routes(), "FrozenLake-v0", session_id="s1", transport="http"),
    ]


def test_every_session_handle_satisfies_the_session_contract(tmp_path: Any) -> None:
    admin = NodeAdmin("http://127.0.0.1:9", "secret", node_id="n1")
    handles = _handles(tmp_path, admin)
    try:
        assert [type(h) for h in handles] == list(HANDLES)
        for handle in handles:
            assert isinstance(handle, EnvSession), type(handle).__name__
            assert isinstance(handle, TextEnvProtocol)
            assert (handle.session_id, handle.env_id, handle.sandbox_id) == ("s1", "FrozenLake-v0", "sb-1")
            assert handle.system_prompt() == "rules" and not handle.closed
            assert handle.tools == ()  # a text env's: the open answer lists none
    finally:
        for handle in handles:
            if isinstance(handle, RemoteEnv):
                handle.close()
        admin.close()


def _hints(fn: Callable[..., object]) -> dict[str, object]:
    return typing.get_type_hints(fn)


@pytest.mark.parametrize("handle", HANDLES, ids=lambda h: h.__name__)
@pytest.mark.parametrize("name", METHODS)
def test_each_method_has_the_protocols_signature(handle: type, name: str) -> None:
    proto = EnvSession if name in vars(EnvSession) else TextEnvProtocol
    expected, got = getattr(proto, name), getattr(handle, name)
    shape = [(p.name, p.kind, p.default) for p in inspect.signature(expected).parameters.values()]
    assert [(p.name, p.kind, p.default) for p in inspect.signature(got).parameters.values()] == shape
    want, have = _hints(expected), _hints(got)
    if name == "fork":  # a fork is a session of the same kind
        assert have.pop("return") is handle
        want.pop("return")
    assert have == want, f"{handle.__name__}.{name}"


def test_the_control_planes_live_sessions_hold_a_session_handle() -> None:
    assert typing.get_type_hints(LiveSession)["remote"] is EnvSession


def test_a_plain_env_and_the_data_plane_socket_are_not_session_handles() -> None:
    env = hub.make("FrozenLake-v0")
    assert isinstance(env, TextEnvProtocol) and not isinstance(env, EnvSession)  # no session ids, no fork
    # the data plane's socket carries the steps of a session whose handle is elsewhere (RemoteEnv)
    assert not hasattr(DataPlaneSession, "fork") and not hasattr(DataPlaneSession, "set_state")
