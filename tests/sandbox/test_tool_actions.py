"""The same tool-calling action, and the same results, through every env handle.

A turn with tool calls (:class:`~rockroll.envs.tools.ToolAction`) is played on ``EchoTools-v0``
(tests/sandbox/plugins/rr_tool_echo.py) in process, through ``envhub.make``'s wrapper, an in-sandbox server
(HTTP socket, batch, channel), a node agent (its calls, its channel, its data plane), a process sandbox, and
the control plane (HTTP step and batch, its WebSocket, ``RemoteEnv``, the OpenEnv face): each answers the
same observations, rewards and ``info["tool_results"]``, lists the same tools, still takes text, and refuses
a malformed action with the wrong field named.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette

import rockroll.envhub as hub
from rockroll.api.server.app import create_app
from rockroll.client.remote_env import RemoteEnv
from rockroll.client.sdk import Client
from rockroll.envs.action_wire import read_action
from rockroll.envs.agent_identity import AgentIdentity
from rockroll.envs.errors import ActionTypeError
from rockroll.envs.tools import Tool, ToolAction, ToolCall, action_to_wire
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.client import SandboxClient
from rockroll.sandbox.node.agent import NodeAgent
from rockroll.sandbox.node.dataplane import dataplane_routes
from rockroll.sandbox.node.tokens import SessionTokens
from rockroll.sandbox.server import worker_env
from rockroll.sandbox.server.app import SandboxServer, make_httpd
from rockroll.sandbox.server.channel import serve_channel
from rockroll.sandbox.session import RemoteSession, run_batch
from tests.api.conftest import make_settings

PLUGINS = Path(__file__).parent / "plugins"
ENV = "EchoTools-v0"
TURN = ToolAction("say it", (ToolCall("c1", "echo", {"text": "yo"}), ToolCall("c2", "nope", {})))
FINISH = ToolAction("", (ToolCall("c3", "finish", {}),))
BAD = {"text": "x", "tool_calls": [{"id": "c1", "name": "echo", "arguments": "not an object"}]}
BAD_FIELD = "action.tool_calls[0].arguments"
SECRET = "s" * 32


@pytest.fixture
def echo_tools(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Tool, ...]]:
    """``EchoTools-v0`` registered in this process (an in-process sandbox server makes it from here)."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    mod = importlib.import_module("rr_tool_echo")
    hub.register(ENV, mod.EchoTools, max_steps=10, override=True)
    yield mod.EchoTools.tools
    hub.deregister(ENV)


def play(env: Any) -> list[Any]:
    """Reset, a turn with calls (one unknown), a turn of text, the finishing call: what every handle must answer."""
    out = [env.reset(seed=3), env.step(TURN), env.step("<answer>no call</answer>"), env.step(FINISH)]
    return [tuple(o) for o in out]


@pytest.fixture
def expected(echo_tools: tuple[Tool, ...]) -> list[Any]:
    return play(hub.make(ENV).unwrapped)


def test_in_process_and_through_make_s_wrapper(echo_tools: tuple[Tool, ...], expected: list[Any]) -> None:
    env = hub.make(ENV)
    assert env.tools == echo_tools and play(env) == expected
    results = expected[1][4]["tool_results"]
    assert [(r["tool_call_id"], r["error"]) for r in results] == [("c1", False), ("c2", True)]
    assert results[0]["content"] == "echo: yo" and expected[3][2] is True  # finish ends the episode
    text_env = hub.make("FrozenLake-v0", is_slippery=False)
    assert text_env.tools == ()
    text_env.reset(seed=0)
    assert text_env.step(ToolAction("<answer>Right</answer>"))[3:4] == (False,)  # a turn of text only: its text
    with pytest.raises(ActionTypeError) as e:
        text_env.step(TURN)
    assert e.value.field == "action.tool_calls"
    with pytest.raises(ActionTypeError) as e:
        read_action(BAD)
    assert e.value.field == BAD_FIELD


class _Host:
    id, generation, deleted = "sb-tools", 1, False

    def report_failure(self) -> None:
        pass

    def session_closed(self) -> None:
        pass

    def attach_session(self, info: Any) -> RemoteSession:
        raise NotImplementedError


@pytest.fixture
def in_process_server(
    tmp_path: Any, state_dir: str, echo_tools: tuple[Tool, ...]
) -> Iterator[tuple[SandboxServer, str]]:
    """An in-sandbox server in this process: its HTTP socket and its channel."""
    state = SandboxServer(str(tmp_path / "ws"), max_sessions=8)
    sock = os.path.join(state_dir, "s.sock")
    channel = serve_channel(sock, state)
    assert channel is not None
    httpd = make_httpd(sock, state)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield state, sock
    channel.close()
    httpd.shutdown()
    httpd.server_close()
    state.sessions.close_all()


def _session(state: SandboxServer, sock: str) -> RemoteSession:
    return RemoteSession(_Host(), state.sessions.make(ENV), SandboxClient(sock, sandbox_id=_Host.id))


def test_an_in_sandbox_server_s_session_its_batch_and_a_node_agent(
    in_process_server: tuple[SandboxServer, str], echo_tools: tuple[Tool, ...], expected: list[Any]
) -> None:
    state, sock = in_process_server
    session = _session(state, sock)
    assert session.tools == echo_tools and play(session) == expected
    session.reset(seed=3)
    assert run_batch([(session, "step", {"action": TURN})]) == [expected[1]]
    with pytest.raises(ActionTypeError) as e:  # what an old or foreign client could send: refused, typed
        session.client.call("env.step", session_id=session.session_id, action=BAD)
    assert e.value.field == BAD_FIELD
    agent = NodeAgent("n1", SessionTokens(SECRET), capacity=8)
    entry = agent.attach("se-1", "alice", session)
    token = agent.tokens.issue("se-1", "alice", "n1")[0]
    session.reset(seed=3)
    step = agent.call(entry, {"op": "step", "action": action_to_wire(TURN)})  # HTTP socket
    assert (step["observation"], step["info"]) == (expected[1][0], expected[1][4])
    assert agent.call(entry, {"op": "tools"})["tools"] == [t.to_openai() for t in echo_tools]

    async def on_loop() -> list[Any]:  # the channel: one call, then a batch
        await agent.acall(entry, {"op": "reset", "seed": 3})
        one = await agent.acall(entry, {"op": "step", "action": action_to_wire(TURN)})
        await agent.acall(entry, {"op": "reset", "seed": 3})
        many = await agent.abatch([{"token": token, "action": action_to_wire(TURN)}])
        return [one, many[0]]

    for answer in asyncio.run(on_loop()):
        assert answer["info"] == expected[1][4], answer
    assert entry.channel  # those went over the sandbox's channel
    items = agent.batch([{"token": token, "action": BAD}])
    assert items[0]["status"] == 422 and items[0]["error"]["details"]["field"] == BAD_FIELD


def test_a_node_agent_s_data_plane(
    in_process_server: tuple[SandboxServer, str], echo_tools: tuple[Tool, ...], expected: list[Any]
) -> None:
    state, sock = in_process_server
    agent = NodeAgent("n1", SessionTokens(SECRET), capacity=8)
    agent.attach("se-1", "alice", _session(state, sock))
    token = agent.tokens.issue("se-1", "alice", "n1")[0]
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(Starlette(routes=dataplane_routes(lambda app: agent))) as c:
        with c.websocket_connect("/v1/node/sessions/se-1/ws", headers=auth) as ws:
            ws.send_json({"op": "reset", "seed": 3})
            ws.receive_json()
            ws.send_json({"op": "step", "seq": 1, "action": action_to_wire(TURN)})
            assert ws.receive_json()["info"] == expected[1][4]
            ws.send_json({"op": "step", "seq": 2, "action": BAD})
            bad = ws.receive_json()
            assert bad["status"] == 422 and bad["error"]["details"]["field"] == BAD_FIELD, bad
            ws.send_json({"op": "step", "seq": 2, "action": "<answer>no call</answer>"})
            assert ws.receive_json()["observation"] == expected[2][0]
        r = c.post("/v1/node/step", json={"steps": [{"token": token, "seq": 3, "action": action_to_wire(FINISH)}]},
                   headers=auth)  # fmt: skip
        assert r.json()["results"][0]["info"] == expected[3][4], r.text


def test_a_process_sandbox_session(make_manager: Any, echo_tools: tuple[Tool, ...], expected: list[Any]) -> None:
    spec = SandboxSpec(name="tools", env=(("ROCKROLL_ENV_MODULES", "rr_tool_echo"), ("PYTHONPATH", str(PLUGINS))))
    with make_manager().open_session(ENV, spec=spec) as session:
        assert session.tools == echo_tools and play(session) == expected
        with pytest.raises(ActionTypeError):
            session.step({"text": "a mapping is no action"})  # type: ignore[arg-type]


def test_a_custom_env_s_worker_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, echo_tools: tuple[Tool, ...], expected: list[Any]
) -> None:
    """The worker a custom env's session runs in (as this user here: the uid change is not what is tested)."""
    monkeypatch.setattr(worker_env, "argv_as", lambda identity, argv, cwd=None: list(argv))
    monkeypatch.setenv("ROCKROLL_ENV_MODULES", "rr_tool_echo")
    monkeypatch.setenv("PYTHONPATH", str(PLUGINS))
    worker = worker_env.WorkerEnv(AgentIdentity(60_000, 60_000, str(tmp_path)), ENV, {})
    try:
        assert worker.tools == echo_tools and play(worker) == expected
        with pytest.raises(ActionTypeError) as e:
            worker._call("step", action=BAD)
        assert e.value.field == BAD_FIELD
    finally:
        worker.close()


SOURCE = (PLUGINS / "rr_tool_echo.py").read_bytes()


@pytest.fixture
def app_client(echo_tools: tuple[Tool, ...]) -> Iterator[TestClient]:
    from rockroll.api.server.serve_proc import scratch_dir

    d = scratch_dir("tools")
    with TestClient(create_app(make_settings(d, dev_mode=True))) as c:
        yield c
        for sb in c.app.state.rr.placement.list():
            c.app.state.rr.placement.delete(sb.id)


def test_the_control_plane_http_websocket_remote_env_and_openenv(
    app_client: TestClient, echo_tools: tuple[Tool, ...], expected: list[Any]
) -> None:
    c, wire = app_client, action_to_wire(TURN)
    upload = {"id": "EchoToolsUp-v0", "kind": "source", "entry_point": "rr_tool_echo:EchoTools",
              "source_name": "rr_tool_echo.py", "source_b64": base64.b64encode(SOURCE).decode()}  # fmt: skip
    r = c.post("/v1/envs", json=upload)
    assert r.status_code == 201, r.text
    env_id = r.json()["id"]
    opened = c.post("/v1/sessions", json={"env": env_id}).json()
    sid, tools = opened["id"], [t.to_openai() for t in echo_tools]
    assert opened["tools"] == tools and c.get(f"/v1/sessions/{sid}").json()["tools"] == tools
    c.post(f"/v1/sessions/{sid}/reset", json={"seed": 3})
    assert c.post(f"/v1/sessions/{sid}/step", json={"action": wire}).json()["info"] == expected[1][4]
    bad = c.post(f"/v1/sessions/{sid}/step", json={"action": BAD})
    assert bad.status_code == 422 and BAD_FIELD in bad.json()["error"]["message"], bad.text
    c.post(f"/v1/sessions/{sid}/reset", json={"seed": 3})
    batch = c.post("/v1/sessions/step", json={"steps": [{"id": sid, "action": wire}]}).json()
    assert batch["results"][0]["info"] == expected[1][4], batch
    with c.websocket_connect(f"/v1/sessions/{sid}/ws") as ws:
        ws.send_json({"op": "reset", "seed": 3})
        ws.receive_json()
        ws.send_json({"op": "step", "action": wire})
        assert ws.receive_json()["info"] == expected[1][4]
        ws.send_json({"op": "step", "action": BAD})
        answer = ws.receive_json()
        assert answer["status"] == 422 and answer["error"]["details"]["field"] == BAD_FIELD, answer
    sdk = Client("http://testserver", retries=0)
    sdk._http = c  # the SDK's routes over the in-process app
    with RemoteEnv(sdk, env_id, transport="http") as remote:
        assert remote.tools == echo_tools and play(remote) == expected
    with c.websocket_connect(f"/openenv/{env_id}/ws") as ws:
        ws.send_json({"type": "reset", "data": {"seed": 3}})
        ws.receive_json()
        calls = [c.to_dict() for c in TURN.calls]
        ws.send_json({"type": "step", "data": {"message": TURN.text, "tool_calls": calls}})
        assert ws.receive_json()["data"]["observation"]["info"] == expected[1][4]
    lake = c.post("/v1/sessions", json={"env": "FrozenLake-v0"}).json()  # a text env, on the embedded node agent
    assert lake["tools"] == [] and c.app.state.rr.sessions._live[lake["id"]].entry is not None
    c.post(f"/v1/sessions/{lake['id']}/reset", json={"seed": 0})
    text = c.post(f"/v1/sessions/{lake['id']}/step", json={"action": {"text": "<answer>Right</answer>"}})
    assert text.status_code == 200 and text.json()["info"]["action_is_valid"], text.text
    called = c.post(f"/v1/sessions/{lake['id']}/step", json={"action": wire})
    assert called.status_code == 400 and called.json()["error"]["details"]["field"] == "action.tool_calls"
    with c.websocket_connect(f"/v1/sessions/{lake['id']}/ws") as ws:  # over the sandbox's channel
        ws.send_json({"op": "step", "action": {"text": "<answer>Down</answer>", "tool_calls": []}})
        assert ws.receive_json()["info"]["action_is_valid"]
        ws.send_json({"op": "step", "action": wire})
        answer = ws.receive_json()
        assert answer["status"] == 400 and answer["error"]["details"]["field"] == "action.tool_calls", answer
