"""A connection to the in-sandbox server that drops after the server ran the call.

The server here is the real one (in a thread); its dispatch runs the op, then the handler fails
before answering, as it does when an answer cannot be sent (the connection closes unanswered). A
step must then raise ``SandboxLost`` and stay applied once; a read is resent and answered.
"""

from __future__ import annotations

import os
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from rockroll.sandbox.client import SandboxClient
from rockroll.sandbox.errors import SandboxLost
from rockroll.sandbox.server.app import SandboxServer, make_httpd


class DroppingServer:
    """The real server; ``drop[op] = n`` drops the answers to the next ``n`` calls of ``op`` (after running them)."""

    def __init__(self, workspace: str, socket_path: str) -> None:
        self.state = SandboxServer(workspace, max_sessions=4)
        self.ran: Counter[str] = Counter()
        self.drop: Counter[str] = Counter()
        run = self.state.dispatch

        def dispatch(op: str, args: dict[str, Any]) -> Any:
            answer = run(op, args)
            self.ran[op] += 1
            if self.drop[op] > 0:
                self.drop[op] -= 1
                raise ConnectionAbortedError(f"test: {op} ran, its answer is dropped")
            return answer

        self.state.dispatch = dispatch  # type: ignore[method-assign]
        self.httpd = make_httpd(socket_path, self.state)
        self.accepted: list[socket.socket] = []
        accept = self.httpd.get_request

        def get_request() -> tuple[socket.socket, Any]:
            sock, addr = accept()
            self.accepted.append(sock)
            return sock, addr

        self.httpd.get_request = get_request  # type: ignore[method-assign]
        self.httpd.handle_error = lambda *a: None  # type: ignore[method-assign] # quiet: the drop is the test
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.state.sessions.close_all()


@pytest.fixture
def dropping(tmp_path: Any, state_dir: str) -> Iterator[tuple[DroppingServer, SandboxClient]]:
    sock = os.path.join(state_dir, "d.sock")
    server = DroppingServer(str(tmp_path / "ws"), sock)
    client = SandboxClient(sock, sandbox_id="test", timeout_s=30)
    yield server, client
    client.close()
    server.close()


def test_a_dropped_step_is_not_sent_again(dropping: tuple[DroppingServer, SandboxClient]) -> None:
    server, client = dropping
    sid = client.call("env.make", env_id="FrozenLake-v0", kwargs={"is_slippery": False})["session_id"]
    client.call("env.reset", session_id=sid, seed=0)
    server.drop["env.step"] = 1
    with pytest.raises(SandboxLost, match="connection dropped during env.step"):
        client.call("env.step", session_id=sid, action="<answer>Right</answer>")
    assert server.ran["env.step"] == 1
    assert client.call("env.get_state", session_id=sid)["elapsed_steps"] == 1  # applied once, not twice
    client.call("env.step", session_id=sid, action="<answer>Right</answer>")  # the client goes on, reconnected
    assert client.call("env.get_state", session_id=sid)["elapsed_steps"] == 2


def test_a_dropped_read_is_resent_once(dropping: tuple[DroppingServer, SandboxClient]) -> None:
    server, client = dropping
    server.drop["health"] = 1
    assert client.call("health")["max_sessions"] == 4
    assert server.ran["health"] == 2
    server.drop["health"] = 2
    with pytest.raises(SandboxLost):
        client.call("health")


def test_a_connection_closed_while_idle_is_replaced_before_sending(
    dropping: tuple[DroppingServer, SandboxClient],
) -> None:
    server, client = dropping
    sid = client.call("env.make", env_id="FrozenLake-v0")["session_id"]
    client.call("env.reset", session_id=sid, seed=0)
    for conn in server.accepted:  # the server closes the kept-alive connection while it is idle
        conn.shutdown(socket.SHUT_RDWR)
    client.call("env.step", session_id=sid, action="<answer>Down</answer>")  # no SandboxLost: nothing was sent
    assert server.ran["env.step"] == 1
