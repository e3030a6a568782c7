"""The sandbox channel's frames: many sessions' calls in one message, each answered to its own caller.

The in-sandbox server runs in this process (its channel on a thread of its own); the agent's side
(:class:`SandboxChannel`, :class:`NodeAgent` batches) runs on an event loop of the test.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.sync.client import unix_connect

import rockroll.envhub as envhub
from rockroll.envs.errors import ResetNeeded
from rockroll.sandbox.client import SandboxClient
from rockroll.sandbox.errors import SandboxLost, SandboxTimeout
from rockroll.sandbox.node.agent import NodeAgent
from rockroll.sandbox.node.channel import Channels, SandboxChannel
from rockroll.sandbox.node.tokens import SessionTokens
from rockroll.sandbox.server.app import SandboxServer, make_httpd
from rockroll.sandbox.server.channel import BOOT_HEADER, CHANNEL_HEADER, ChannelServer, channel_path, serve_channel
from rockroll.sandbox.session import RemoteSession

ENV, KWARGS = "FrozenLake-v0", {"size": 4, "is_slippery": False}
MOVES = ["<answer>Right</answer>", "<answer>Down</answer>", "<answer>Left</answer>", "<answer>Up</answer>"]


class Host:
    """What a RemoteSession needs of its sandbox."""

    id = "sb-test"
    generation = 1
    deleted = False

    def __init__(self) -> None:
        self.failures = 0

    def report_failure(self) -> None:
        self.failures += 1

    def session_closed(self) -> None:
        pass

    def attach_session(self, info: dict[str, Any]) -> RemoteSession:
        raise NotImplementedError


class Sandbox:
    """A server state with its channel, and helpers to open sessions on it."""

    def __init__(self, state: SandboxServer, sock: str, channel: ChannelServer) -> None:
        self.state, self.sock, self.channel, self.host = state, sock, channel, Host()

    def session(self, seed: int = 0) -> RemoteSession:
        info = self.state.sessions.make(ENV, KWARGS)
        self.state.sessions.reset(info["session_id"], seed)
        return RemoteSession(self.host, info, SandboxClient(self.sock, sandbox_id=self.host.id))


@pytest.fixture
def sandbox(tmp_path: Any, state_dir: str) -> Iterator[Sandbox]:
    state = SandboxServer(str(tmp_path / "ws"), max_sessions=32)
    sock = os.path.join(state_dir, "s.sock")
    channel = serve_channel(sock, state)
    assert channel is not None
    httpd = make_httpd(sock, state)  # the HTTP socket: the agent's path where a session is busy elsewhere
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield Sandbox(state, sock, channel)
    channel.close()
    httpd.shutdown()
    httpd.server_close()
    state.sessions.close_all()


def local_steps(seed: int, actions: list[str]) -> list[Any]:
    """The same env played here: the answers the sandbox must give, JSON-normalised (an error: its type's name)."""
    env = envhub.make(ENV, **KWARGS)
    env.reset(seed=seed)
    out: list[Any] = []
    for a in actions:
        try:
            out.append(json.loads(json.dumps([*env.step(a)])))
        except Exception as e:  # noqa: BLE001 - a step after the episode ended
            out.append(type(e).__name__)
    return out


def named(results: list[Any]) -> list[Any]:
    return [type(r).__name__ if isinstance(r, BaseException) else r for r in results]


def test_a_frame_is_answered_per_call_and_an_error_answers_only_its_call(sandbox: Sandbox) -> None:
    a, b = sandbox.session(seed=1), sandbox.session(seed=2)
    frame = [
        [1, "env.step", {"session_id": a.session_id, "action": MOVES[0]}],
        [2, "env.step", {"session_id": "no-such-session", "action": MOVES[0]}],
        [3, "env.step", {"session_id": b.session_id, "action": MOVES[1]}],
        [4, "no.such.op", {}],
        "not a call",
        [5, "env.step", {"session_id": a.session_id, "action": MOVES[1]}],
    ]
    with unix_connect(channel_path(sandbox.sock), uri="ws://sandbox/") as ws:
        assert ws.response.headers[CHANNEL_HEADER] == "frames"
        assert ws.response.headers[BOOT_HEADER] == sandbox.state.boot_id
        ws.send(json.dumps(frame))
        answers: dict[Any, Any] = {}
        deadline = time.monotonic() + 10
        while len(answers) < len(frame) and time.monotonic() < deadline:
            for cid, answer in json.loads(ws.recv(timeout=10)):
                answers[cid] = answer
    assert answers[1] == {"result": local_steps(1, MOVES[:1])[0]}
    assert answers[5] == {"result": local_steps(1, MOVES[:2])[1]}  # after call 1: a session's calls keep their order
    assert answers[3] == {"result": local_steps(2, MOVES[1:2])[0]}
    assert answers[2]["error"]["type"] == "SessionNotFound"
    assert answers[4]["error"]["type"] == "UnknownOp"
    assert answers[None]["error"]["type"] == "BadRequest"


def test_a_message_of_one_call_is_still_answered(sandbox: Sandbox) -> None:
    """An agent of an earlier release sends ``{"op", "args"}`` and gets ``{"result"}``."""
    a = sandbox.session(seed=3)
    with unix_connect(channel_path(sandbox.sock), uri="ws://sandbox/") as ws:
        ws.send(json.dumps({"op": "env.step", "args": {"session_id": a.session_id, "action": MOVES[0]}}))
        assert json.loads(ws.recv(timeout=10)) == {"result": local_steps(3, MOVES[:1])[0]}
        ws.send("{not json")
        assert json.loads(ws.recv(timeout=10))["error"]["type"] == "BadRequest"


def test_concurrent_calls_share_one_frame_and_come_back_to_their_callers(sandbox: Sandbox) -> None:
    sessions = [sandbox.session(seed=i) for i in range(8)]

    async def play() -> tuple[list[Any], int]:
        channel = await Channels().get(sessions[0])
        assert isinstance(channel, SandboxChannel)
        sent: list[bytes] = []
        send_text = channel.proto.send_text

        def counting_send(data: bytes, **kw: Any) -> None:
            sent.append(data)
            send_text(data, **kw)

        channel.proto.send_text = counting_send  # type: ignore[method-assign]
        out = []
        for k in range(3):  # three rounds: each session's steps in order, all sessions together
            calls = [channel.call(s, "env.step", action=MOVES[k]) for s in sessions]
            out.append(named(await asyncio.gather(*calls, return_exceptions=True)))
        await channel.close()
        return out, len(sent)

    rounds, frames = asyncio.run(play())
    # per round of 8 concurrent calls on an idle channel: the first goes at once, the other 7 in one frame
    assert frames == 6, rounds
    for i, _s in enumerate(sessions):
        assert [rounds[k][i] for k in range(3)] == local_steps(i, MOVES[:3])


def test_an_error_in_one_call_of_a_frame_fails_that_call_alone(sandbox: Sandbox) -> None:
    good, fresh = sandbox.session(seed=4), sandbox.session(seed=5)
    info = sandbox.state.sessions.make(ENV, KWARGS)  # never reset: a step is ResetNeeded
    unreset = RemoteSession(sandbox.host, info, SandboxClient(sandbox.sock, sandbox_id=sandbox.host.id))
    gone = sandbox.session(seed=6)
    sandbox.state.sessions.close(gone.session_id)  # the server no longer knows it: SandboxLost

    async def play() -> list[Any]:
        channel = await Channels().get(good)
        assert channel is not None
        calls = [channel.call(s, "env.step", action=MOVES[0]) for s in (good, unreset, gone, fresh)]
        out = await asyncio.gather(*calls, return_exceptions=True)
        await channel.close()
        return out

    a, b, c, d = asyncio.run(play())
    assert a == local_steps(4, MOVES[:1])[0] and d == local_steps(5, MOVES[:1])[0]
    assert isinstance(b, ResetNeeded)
    assert isinstance(c, SandboxLost)


def test_a_slow_session_does_not_hold_up_quick_ones(sandbox: Sandbox) -> None:
    slow, quick = sandbox.session(seed=7), sandbox.session(seed=8)
    release = threading.Event()
    real_step = sandbox.state.sessions.step

    def step(session_id: str, action: Any) -> Any:
        if session_id == slow.session_id:
            release.wait(10)
        return real_step(session_id, action)

    sandbox.state.ops["env.step"] = step
    sandbox.state.sessions._sessions[slow.session_id].cost["env.step"] = 1.0  # known slow: runs on the pool

    async def play() -> tuple[Any, list[Any]]:
        channel = await Channels().get(slow)
        assert channel is not None
        slow_call = asyncio.ensure_future(channel.call(slow, "env.step", action=MOVES[0]))
        quick_answers = [await channel.call(quick, "env.step", action=MOVES[k]) for k in range(3)]
        assert not slow_call.done()  # the quick session went on while the slow one still ran
        release.set()
        out = await slow_call
        await channel.close()
        return out, quick_answers

    slow_answer, quick_answers = asyncio.run(play())
    assert slow_answer == local_steps(7, MOVES[:1])[0]
    assert quick_answers == local_steps(8, MOVES[:3])


def test_a_dropped_channel_fails_the_waiting_calls_with_sandbox_lost(sandbox: Sandbox) -> None:
    a = sandbox.session(seed=9)
    started = threading.Event()

    def stuck(session_id: str, action: Any) -> Any:
        started.set()
        time.sleep(1.0)
        return sandbox.state.sessions.step(session_id, action)

    sandbox.state.ops["env.step"] = stuck
    sandbox.state.sessions._sessions[a.session_id].cost["env.step"] = 1.0  # known slow: runs on the pool

    async def play() -> BaseException | None:
        channel = await Channels().get(a)
        assert channel is not None
        call = asyncio.ensure_future(channel.call(a, "env.step", action=MOVES[0]))
        while not started.is_set():
            await asyncio.sleep(0.01)
        links = sandbox.channel.links  # the sandbox drops the connection under the waiting call
        sandbox.channel.loop.call_soon_threadsafe(lambda: [link.transport.abort() for link in list(links)])
        try:
            await call
        except BaseException as e:  # noqa: BLE001
            return e
        return None

    err = asyncio.run(play())
    assert isinstance(err, SandboxLost)
    assert sandbox.host.failures == 1  # the monitor was asked to probe the sandbox


# ------------------------------------------------------------------ batches at the agent
def attached(sandbox: Sandbox, n: int) -> tuple[NodeAgent, list[str]]:
    tokens = SessionTokens("s" * 40)
    agent = NodeAgent("n1", tokens, capacity=64)
    toks = []
    for i in range(n):
        agent.attach(f"se-{i:04x}", "alice", sandbox.session(seed=i))
        toks.append(tokens.issue(f"se-{i:04x}", "alice", "n1")[0])
    return agent, toks


def test_a_batch_goes_over_the_channel_numbered_with_replays_and_gaps(sandbox: Sandbox) -> None:
    agent, toks = attached(sandbox, 4)

    async def play() -> list[list[dict[str, Any]]]:
        first = await agent.abatch([{"token": t, "seq": 1, "action": MOVES[0]} for t in toks])
        again = await agent.abatch(
            [
                {"token": toks[0], "seq": 1, "action": MOVES[1]},  # a replay: the recorded answer, not stepped
                {"token": toks[1], "seq": 3, "action": MOVES[1]},  # skips step 2: 409
                {"token": toks[2], "seq": 2, "action": 5},  # not a string: 422, this item only
                {"token": toks[3], "seq": 2, "action": MOVES[1]},
                {"token": "forged", "seq": 2, "action": MOVES[1]},
            ]
        )
        return [first, again]

    first, again = asyncio.run(play())
    for i in range(4):
        want = local_steps(i, MOVES[:1])[0]
        assert first[i]["seq"] == 1 and [first[i][k] for k in ("observation", "reward", "terminated")] == want[:3]
    assert again[0] == first[0] | {"replayed": True}
    assert again[1]["status"] == 409 and again[1]["error"]["details"]["expected"] == 2
    assert again[2]["status"] == 422
    assert again[3]["seq"] == 2 and again[3]["observation"] == local_steps(3, MOVES[:2])[1][0]
    assert again[4]["status"] == 401
    assert [agent.get(f"se-{i:04x}").log.last for i in range(4)] == [1, 1, 1, 2]


def test_a_batch_waits_on_a_thread_for_a_session_busy_elsewhere(sandbox: Sandbox) -> None:
    agent, toks = attached(sandbox, 2)
    entry = agent.get("se-0000")
    entry.log.lock.acquire()  # another plane's call holds this session now

    async def play() -> list[dict[str, Any]]:
        task = asyncio.ensure_future(agent.abatch([{"token": t, "seq": 1, "action": MOVES[0]} for t in toks]))
        await asyncio.sleep(0.2)
        assert not task.done()  # it waits for the session, without blocking the loop
        entry.log.lock.release()
        return await task

    out = asyncio.run(play())
    assert [r.get("seq") for r in out] == [1, 1], out


def test_a_call_not_answered_in_time_times_out_alone(sandbox: Sandbox) -> None:
    slow, quick = sandbox.session(seed=10), sandbox.session(seed=11)
    release = threading.Event()
    real_step = sandbox.state.sessions.step

    def step(session_id: str, action: Any) -> Any:
        if session_id == slow.session_id:
            release.wait(10)
        return real_step(session_id, action)

    sandbox.state.ops["env.step"] = step
    sandbox.state.sessions._sessions[slow.session_id].cost["env.step"] = 1.0  # known slow: runs on the pool

    async def play() -> Any:
        channel = await Channels().get(slow)
        assert channel is not None
        with pytest.raises(SandboxTimeout):
            await channel.call(slow, "env.step", timeout_s=0.3, action=MOVES[0])
        out = await channel.call(quick, "env.step", action=MOVES[0])  # the channel still serves the others
        release.set()
        await channel.close()
        return out

    assert asyncio.run(play()) == local_steps(11, MOVES[:1])[0]


def test_a_sandbox_whose_channel_takes_no_frames_has_none(state_dir: str) -> None:
    """A server of an earlier release (one call per message): the agent steps its sessions over HTTP."""
    from websockets.sync.server import unix_serve

    sock = os.path.join(state_dir, "old.sock")
    old = unix_serve(lambda ws: ws.recv(), channel_path(sock))
    threading.Thread(target=old.serve_forever, daemon=True).start()
    host = Host()
    remote = RemoteSession(host, {"session_id": "abc"}, SandboxClient(sock, sandbox_id=host.id))

    async def look() -> Any:
        return await Channels().get(remote)

    try:
        assert asyncio.run(look()) is None
    finally:
        old.shutdown()
