"""The session handles of the sandbox layer satisfy :class:`rockroll.sandbox.session.EnvSession`.

Built without a server: the handles only talk to their host on a call, so the check is about their
surface (``isinstance`` with a runtime-checkable protocol checks names, not signatures).
"""

from __future__ import annotations

from typing import Any

import rockroll.envhub as hub
from rockroll.envs import TextEnvProtocol
from rockroll.sandbox.client import SandboxClient
from rockroll.sandbox.node.client import DataPlaneSession
from rockroll.sandbox.node.remote import NodeAdmin, NodeSession
from rockroll.sandbox.session import EnvSession, RemoteSession

INFO = {"session_id": "s1", "env_id": "FrozenLake-v0", "sandbox_id": "sb-1", "system_prompt": "rules"}


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


def test_the_sandbox_and_node_handles_satisfy_the_session_contract(tmp_path: Any) -> None:
    admin = NodeAdmin("http://127.0.0.1:9", "secret", node_id="n1")
    handles = [
        RemoteSession(Host(), INFO, SandboxClient(str(tmp_path / "no.sock"), sandbox_id="sb-1")),
        NodeSession(admin, INFO),
    ]
    try:
        for handle in handles:
            assert isinstance(handle, EnvSession), type(handle).__name__
            assert isinstance(handle, TextEnvProtocol)
            assert (handle.session_id, handle.env_id, handle.sandbox_id) == ("s1", "FrozenLake-v0", "sb-1")
            assert handle.system_prompt() == "rules" and not handle.closed
    finally:
        admin.close()


def test_a_plain_env_and_the_data_plane_socket_are_not_session_handles() -> None:
    env = hub.make("FrozenLake-v0")
    assert isinstance(env, TextEnvProtocol) and not isinstance(env, EnvSession)  # no session ids, no fork
    # the data plane's socket carries the steps of a session whose handle is elsewhere (RemoteEnv)
    assert not hasattr(DataPlaneSession, "fork") and not hasattr(DataPlaneSession, "set_state")
