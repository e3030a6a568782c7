"""A real ``rockroll serve`` process driven through the client SDK."""

from __future__ import annotations

import textwrap
import time

import gymnasium as gym
import pytest

from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
from rockroll.client.remote_env import RemoteEnv
from rockroll.client.sdk import ApiClientError, AsyncClient, Client, SandboxLostError
from rockroll.envs.play import play_episode

CUSTOM_SOURCE = textwrap.dedent(
    '''
    """A custom env uploaded as a single module: count up to a target."""
    from rockroll.envs.core import StepOutcome, TextEnv


    class Counter(TextEnv):
        instructions = "Say <answer>up</answer> until the counter reaches the target."

        def __init__(self, target: int = 3, **kw):
            super().__init__(**kw)
            self.target = target
            self.n = 0

        def _reset(self, options):
            self.n = int(self.np_random.integers(0, 2))
            return {}

        def _parse_action(self, answer):
            return "up" if answer.strip().lower() == "up" else None

        def _step(self, action):
            self.n += 1
            done = self.n >= self.target
            return StepOutcome(self._render(), 1.0 if done else 0.0, done, effective=True, success=done)

        def _render(self):
            return f"counter={self.n} target={self.target}"

        def action_candidates(self):
            return ["up"]

        def _get_state(self):
            return {"n": self.n}

        def _set_state(self, data):
            self.n = int(data["n"])
    '''
)


def wait_for(predicate, timeout_s: float = 30.0, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return False


def test_sessions_reset_step_fork_state(server: ServerProc) -> None:
    with Client(server.url, server.tokens["alice"]) as c:
        info = c.create_session("FrozenLake-v0", {"is_slippery": False})
        assert info["id"] and info["sandbox_id"] and "<answer>" in info["system_prompt"]
        first = c.reset(info["id"], seed=3)
        assert isinstance(first["observation"], str) and first["info"]["action_is_valid"]
        out = c.step(info["id"], "<answer>Left</answer>")
        assert set(out) == {"observation", "reward", "terminated", "truncated", "info"}
        snapshot = c.get_state(info["id"])
        fork = c.fork(info["id"])
        a = c.step(info["id"], "<answer>Down</answer>")
        b = c.step(fork["id"], "<answer>Down</answer>")
        assert a["observation"] == b["observation"] and a["reward"] == b["reward"]
        c.set_state(info["id"], snapshot)
        assert c.step(info["id"], "<answer>Down</answer>")["observation"] == a["observation"]
        assert c.actions(info["id"])
        bad = c.step(info["id"], "no answer tags")
        assert bad["info"]["action_is_valid"] is False
        results = c.step_many({info["id"]: "<answer>Up</answer>", fork["id"]: "<answer>Up</answer>", "nope": "x"})
        assert "observation" in results[0] and "observation" in results[1]
        assert results[2]["error"]["code"] == "session_not_found"
        c.close_session(fork["id"])
        with pytest.raises(ApiClientError) as e:
            c.step(fork["id"], "<answer>Up</answer>")
        assert e.value.status == 404
        c.close_session(info["id"])
        steps = [ln for ln in c.metrics().splitlines() if ln.startswith("rockroll_session_steps_total ")]
        assert steps and float(steps[0].split()[1]) >= 6


def test_remote_env_plays_with_random_agent_and_gymnasium(server: ServerProc) -> None:
    with Client(server.url, server.tokens["alice"]) as c:
        with RemoteEnv(c, "FrozenLake-v0") as env:
            res = play_episode(env, "random", seed=5)
            assert res.steps >= 1 and (res.terminated or res.truncated)
            forked = env.fork()
            assert forked.session_id != env.session_id
            forked.close()
        genv = gym.make("rockroll-remote/FrozenLake-v0", client=c, is_slippery=False)
        obs, info = genv.reset(seed=0)
        assert isinstance(obs, str)
        genv.close()


def test_async_client(server: ServerProc) -> None:
    import asyncio

    async def main() -> list:
        async with AsyncClient(server.url, server.tokens["bob"]) as c:
            infos = await asyncio.gather(*[c.create_session("FrozenLake-v0") for _ in range(4)])
            await asyncio.gather(*[c.reset(i["id"], seed=n) for n, i in enumerate(infos)])
            outs = await asyncio.gather(*[c.step(i["id"], "<answer>Up</answer>") for i in infos])
            await asyncio.gather(*[c.close_session(i["id"]) for i in infos])
            assert (await c.health())["status"] == "ok"
            return outs

    outs = asyncio.run(main())
    assert len(outs) == 4 and all("observation" in o for o in outs)


def test_sandbox_routes_and_lost_session(server: ServerProc) -> None:
    with Client(server.url, server.tokens["alice"]) as c:
        sb = c.create_sandbox(memory_mb=256)
        assert sb["state"] == "ready" and sb["owner"] == "alice"
        assert sb["id"] in [s["id"] for s in c.list_sandboxes()]
        res = c.exec(sb["id"], "echo hello && exit 3")
        assert res["exit_code"] == 3 and res["stdout"] == "hello\n"
        slow = c.exec(sb["id"], ["sleep", "5"], timeout_s=0.5)
        assert slow["timed_out"] is True
        c.write_file(sb["id"], "dir/a.txt", b"abc")
        assert c.read_file(sb["id"], "dir/a.txt") == b"abc"
        with pytest.raises(ApiClientError) as e:
            c.read_file(sb["id"], "../../../etc/passwd")
        assert e.value.status == 400 and e.value.code == "invalid_path"
        with pytest.raises(ApiClientError) as e:
            c.read_file(sb["id"], "missing.txt")
        assert e.value.status == 404
        restarted = c.restart_sandbox(sb["id"])
        assert restarted["restarts"] == 1 and restarted["id"] == sb["id"]
        c.delete_sandbox(sb["id"])
        with pytest.raises(ApiClientError) as e:
            c.get_sandbox(sb["id"])
        assert e.value.status == 404
    with Client(server.url, server.tokens["root"]) as admin:
        info = admin.create_session("FrozenLake-v0")
        admin.reset(info["id"], seed=0)
        admin.restart_sandbox(info["sandbox_id"])
        with pytest.raises(SandboxLostError) as e:
            admin.step(info["id"], "<answer>Up</answer>")
        assert e.value.status in (409, 410) and e.value.code == "sandbox_lost"


@pytest.mark.slow
def test_custom_env_from_source_survives_restart() -> None:
    d = scratch_dir("restart")
    srv = ServerProc(d)
    token = create_token(srv.db_url, "erin")
    try:
        srv.start()
        src = d / "counter_env.py"
        src.write_text(CUSTOM_SOURCE)
        with Client(srv.url, token) as c:
            view = c.register_env(
                "Counter-v0",
                kind="source",
                entry_point="counter_env:Counter",
                source=src,
                kwargs={"target": 4},
                max_steps=10,
                tags=["custom", "toy"],
                description="count",
            )
            assert view["id"] == "erin/Counter-v0" and view["owner"] == "erin" and view["validation"]["action"]
            with RemoteEnv(c, "erin/Counter-v0") as env:
                res = play_episode(env, "random", seed=1)
                assert res.success and res.total_reward == 1.0
            long_job = c.create_job("eval", {"env": "FrozenLake-v0", "episodes": 100_000})
            assert wait_for(lambda: c.get_job(long_job["id"])["metrics"].get("episodes", 0) > 0)  # the worker reported
        srv.stop()
        srv.start()
        with Client(srv.url, token) as c:
            interrupted = c.get_job(long_job["id"])
            assert interrupted["state"] == "failed" and "shut down" in interrupted["error"]
            assert 0 < interrupted["metrics"]["episodes"] < 100_000
            shown = c.get_env("erin/Counter-v0")
            assert (shown["id"], shown["owner"], shown["tags"], shown["kwargs"]) == (
                "erin/Counter-v0",
                "erin",
                ["custom", "toy"],
                {"target": 4},
            )
            with RemoteEnv(c, "erin/Counter-v0") as env:
                obs, _ = env.reset(seed=0)
                assert "target=4" in obs
                assert play_episode(env, "random", seed=2).success
            c.delete_env("erin/Counter-v0")
            with pytest.raises(ApiClientError) as e:
                c.get_env("erin/Counter-v0")
            assert e.value.status == 404
    finally:
        srv.cleanup()


def test_client_retries_until_server_is_up() -> None:
    c = Client("http://127.0.0.1:9", "rr_x", retries=2)  # the transport waits 0 s, then 0.5 s
    t0 = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - httpx.ConnectError after the retries
        c.health()
    assert time.monotonic() - t0 >= 0.03
    c.close()


def test_websocket_transport(server: ServerProc) -> None:
    from rockroll.client.session_socket import SessionSocket

    with Client(server.url, server.tokens["alice"]) as c:
        with RemoteEnv(c, "FrozenLake-v0", transport="ws", is_slippery=False) as env:
            res = play_episode(env, "random", seed=4)
            assert res.steps >= 1 and (res.terminated or res.truncated)
            assert env.get_state()["env"]["env"] == "FrozenLakeEnv"
            sock = env._socket
            with pytest.raises(ApiClientError) as e:
                sock.call({"op": "dance"})
            assert e.value.status == 422 and e.value.code == "validation_error"
            with pytest.raises(ApiClientError) as e:
                sock.call({"op": "reset", "seed": -1})
            assert e.value.code == "validation_error"
            assert "observation" in sock.call({"op": "reset", "seed": 2})
            sid = env.session_id
        # another owner cannot open the socket of alice's session; nor can anyone without a token
        import websockets

        other = c.create_session("FrozenLake-v0")["id"]
        for token in (server.tokens["bob"], ""):
            with pytest.raises(websockets.exceptions.InvalidStatus):
                SessionSocket(server.url, token, other)
        c.close_session(other)
        assert sid not in [s["id"] for s in c.list_sessions()]
