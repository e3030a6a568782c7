"""Sessions opened through the control plane are stepped directly at their node agent (real processes, 127.0.0.1).

The control plane answers an open with the agent's endpoint and a signed session token; the client
steps there over one WebSocket (or a batch request), and the control plane's own per-step routes
keep working for the same session (proxied to the agent), numbered in the same sequence.
"""

from __future__ import annotations

import httpx
import pytest

from rockroll.client.remote_env import RemoteEnv
from rockroll.client.sdk import ApiClientError, Client
from rockroll.sandbox.node.client import BatchStepper, DataPlaneSession
from tests.cluster.conftest import ENV, KWARGS, Deployment, wait_node_view

RIGHT = "<answer>Right</answer>"
DOWN = LEFT = "no answer"  # not an action: a no-op step (a format penalty) that never ends the episode


def _open(dep: Deployment, owner: str = "alice") -> tuple[Client, dict]:
    c = Client(dep.url, dep.tokens[owner])
    return c, c.create_session(ENV, KWARGS)


def test_a_session_opened_at_the_control_plane_is_stepped_at_the_standalone_agent(cluster: Deployment) -> None:
    assert cluster.node is not None
    c, opened = _open(cluster)
    with c:
        dp = opened["data_plane"]
        assert dp["endpoint"] == cluster.node.endpoint and dp["node"] == cluster.node.node_id
        assert dp["endpoint"] != cluster.url  # the control plane is not on the step path
        s = DataPlaneSession(dp["endpoint"], opened["id"], dp["token"])
        obs, _ = s.reset(seed=3)
        local = c.get_session(opened["id"])
        assert local["env"] == ENV
        out = s.step_raw(RIGHT)
        assert out["seq"] == 1 and "replayed" not in out and out["observation"] != obs or out["info"]
        assert s.step_raw(LEFT)["seq"] == 2
        assert s.get_state() == c.get_state(opened["id"])  # both planes see the one env
        s.close()
        # the count comes with the agent's heartbeats: one sent just before the open may land after it (a loaded
        # machine delays it), so wait for a heartbeat that counts the session
        mine = wait_node_view(cluster.url, cluster.tokens["root"], cluster.node.node_id, lambda n: n["sessions"] >= 1)
        assert mine["capacity"] == 4 * 64 and mine["embedded"] is False
        c.close_session(opened["id"])
        with pytest.raises(ApiClientError) as e:
            c.step(opened["id"], RIGHT)
        assert e.value.status == 404


def test_the_proxied_routes_still_work_and_share_the_numbering(cluster: Deployment) -> None:
    c, opened = _open(cluster)
    with c:
        sid = opened["id"]
        c.reset(sid, seed=1)
        c.step(sid, RIGHT)  # proxied: number 1 at the agent
        assert c.actions(sid)
        state = c.get_state(sid)
        c.set_state(sid, state)
        s = DataPlaneSession(opened["data_plane"]["endpoint"], sid, opened["data_plane"]["token"])
        assert s.next_seq == 2  # asked of the agent: the proxied step took number 1
        assert s.step_raw(DOWN)["seq"] == 2
        results = c.step_many({sid: LEFT})  # the control plane's batch route, proxied
        assert "observation" in results[0], results
        assert s.step_raw(LEFT, seq=3)["replayed"] is True  # number 3 was the proxied batch step
        forked = c.fork(sid)
        assert forked["data_plane"]["node"] == opened["data_plane"]["node"]
        f = DataPlaneSession(forked["data_plane"]["endpoint"], forked["id"], forked["data_plane"]["token"])
        assert f.get_state() == c.get_state(sid)
        f.close()
        s.close()
        for x in (forked["id"], sid):
            c.close_session(x)


def test_the_control_planes_own_websocket_proxies_to_the_agent(cluster: Deployment) -> None:
    c, opened = _open(cluster)
    with c, RemoteEnv(c, ENV, session_id=opened["id"], transport="ws") as env:
        obs, _ = env.reset(seed=2)
        assert env.step(RIGHT)[0] != "" and env.transport == "ws"


def test_batch_steps_at_the_agent(cluster: Deployment) -> None:
    c = Client(cluster.url, cluster.tokens["alice"])
    with c:
        infos = [c.create_session(ENV, KWARGS) for _ in range(3)]
        b = BatchStepper(infos[0]["data_plane"]["endpoint"])
        tokens = [i["data_plane"]["token"] for i in infos]
        resets = b.step([{"token": t, "op": "reset", "seed": n} for n, t in enumerate(tokens)])
        assert all("observation" in r for r in resets)
        out = b.step([{"token": t, "seq": 1, "action": DOWN} for t in tokens])
        assert [r["seq"] for r in out] == [1, 1, 1] and not any(r.get("replayed") for r in out)
        again = b.step([{"token": tokens[0], "seq": 1, "action": DOWN}, {"token": tokens[1], "seq": 2, "action": DOWN}])
        assert again[0] == out[0] | {"replayed": True} and again[1]["seq"] == 2
        dup = b.step([{"token": tokens[2], "seq": 2, "action": DOWN}, {"token": tokens[2], "seq": 3, "action": DOWN}])
        assert dup[0].get("seq") == 2 and (dup[1]["status"], dup[1]["error"]["code"]) == (400, "bad_request"), dup
        b.close()
        for i in infos:
            c.close_session(i["id"])


def test_remote_env_steps_through_the_direct_endpoint(cluster: Deployment, embedded: Deployment) -> None:
    for dep in (cluster, embedded):
        with Client(dep.url, dep.tokens["bob"]) as c, RemoteEnv(c, ENV, **KWARGS) as env:
            assert env.transport == "direct"
            obs, _ = env.reset(seed=5)
            _, _, terminated, truncated, info = env.step(RIGHT)
            assert "action_is_valid" in info
            assert env._socket.next_seq == 2  # type: ignore[union-attr]
            assert c.get_state(env.session_id) == env.get_state()


def test_the_embedded_default_serves_the_same_data_plane(embedded: Deployment) -> None:
    c, opened = _open(embedded)
    with c:
        dp = opened["data_plane"]
        assert dp["endpoint"] == embedded.url and dp["node"] == "local"
        s = DataPlaneSession(dp["endpoint"], opened["id"], dp["token"])
        s.reset(seed=0)
        assert s.step_raw(RIGHT)["seq"] == 1
        proxied = c.step(opened["id"], DOWN)  # the proxied route takes number 2 on the embedded agent too
        replay = s.step_raw(LEFT)  # this client's number 2: answered with the proxied step, not stepped again
        assert replay["seq"] == 2 and replay["replayed"] and replay["observation"] == proxied["observation"]
        assert s.step_raw(LEFT, seq=3)["seq"] == 3
        assert c.get_session(opened["id"])["steps"] == 1  # the control plane counts its own route's steps
        health = httpx.get(f"{embedded.url}/v1/node/health").json()
        assert health["id"] == "local" and health["sessions"] >= 1
        s.close()
        c.close_session(opened["id"])
