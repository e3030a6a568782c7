"""Node loss reaches clients as data: a SIGKILLed (or frozen) ``rockroll node`` has its sessions answer
``410 session_lost`` within 5 s, leaves no sandbox process behind, and rejoins cleanly when back."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from rockroll.agentrl.errors import classify
from rockroll.api.server.serve_proc import NodeProc, sandbox_pids
from rockroll.client.sdk import Client, SandboxLostError
from rockroll.sandbox.node.client import DataPlaneSession
from tests.cluster.conftest import ENV, KWARGS, Deployment, _deployment, wait_for_node

RIGHT = "<answer>Right</answer>"


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that is not a zombie (read from /proc)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_lost(dep: Deployment, token: str, session_id: str, timeout_s: float = 10.0) -> tuple[float, httpx.Response]:
    """Seconds until the control plane answers 410 for the session (polled every 50 ms), and that answer."""
    t0 = time.monotonic()
    with httpx.Client(base_url=dep.url, headers={"Authorization": f"Bearer {token}"}, timeout=5) as http:
        while time.monotonic() - t0 < timeout_s:
            r = http.get(f"/v1/sessions/{session_id}")
            if r.status_code == 410:
                return time.monotonic() - t0, r
            assert r.status_code == 200, r.text
            time.sleep(0.05)
    raise AssertionError(f"session {session_id} still answered 200 after {timeout_s} s")


def _node_view(dep: Deployment, node_id: str) -> dict:
    r = httpx.get(f"{dep.url}/v1/nodes", headers={"Authorization": f"Bearer {dep.tokens['root']}"}, timeout=5)
    return next(n for n in r.json()["nodes"] if n["id"] == node_id)


@pytest.mark.slow
def test_a_sigkilled_agent_loses_its_sessions_as_410_and_rejoins_when_restarted() -> None:
    gen = _deployment("loss", standalone=True)
    dep = next(gen)
    try:
        node = dep.node
        assert node is not None and node.proc is not None
        with Client(dep.url, dep.tokens["alice"]) as alice:
            sessions = [alice.create_session(ENV, KWARGS) for _ in range(3)]
            alice.reset(sessions[0]["id"], seed=1)
            dp = sessions[1]["data_plane"]
            direct = DataPlaneSession(dp["endpoint"], sessions[1]["id"], dp["token"])
            direct.reset(seed=2)
            direct.step(RIGHT)
            pids = sandbox_pids(node.label)
            assert pids and all(running(p) for p in pids)

            os.kill(node.proc.pid, signal.SIGKILL)
            node.proc.wait(timeout=10)
            took, answer = wait_lost(dep, dep.tokens["alice"], sessions[0]["id"])
            print(f"sessions of the SIGKILLed agent answered 410 after {took:.2f} s")
            assert took <= 5.0, f"the sessions were marked lost {took:.2f} s after the SIGKILL"
            err = answer.json()["error"]
            assert err["code"] == "session_lost" and f"node {node.node_id} stopped answering" in err["message"], err
            assert err["details"]["reason"] == "node_lost" and err["details"]["node"] == node.node_id

            http = httpx.Client(base_url=dep.url, headers={"Authorization": f"Bearer {dep.tokens['alice']}"})
            for s in sessions:  # every route about every session of that agent: 410 with the reason
                for method, path, body in [
                    ("GET", "", None),
                    ("POST", "/step", {"action": RIGHT}),
                    ("POST", "/reset", {"seed": 1}),
                    ("POST", "/token", None),
                    ("GET", "/state", None),
                ]:
                    r = http.request(method, f"/v1/sessions/{s['id']}{path}", json=body)
                    assert (r.status_code, r.json()["error"]["code"]) == (410, "session_lost"), (path, r.text)
            with pytest.raises(SandboxLostError) as lost:  # the SDK's error: an infra failure to the rollout layer
                alice.step(sessions[1]["id"], RIGHT)
            assert (lost.value.status, lost.value.code) == (410, "session_lost") and classify(lost.value) == "infra"
            assert lost.value.reason == "node_lost"
            batch = http.post("/v1/sessions/step", json={"steps": [{"id": sessions[2]["id"], "action": RIGHT}]})
            assert batch.json()["results"][0]["status"] == 410, batch.text
            assert batch.json()["results"][0]["error"]["code"] == "session_lost"

            deadline = time.monotonic() + 10
            while any(running(p) for p in pids) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert [p for p in pids if running(p)] == [], "sandbox processes outlived their agent"
            assert sandbox_pids(node.label) == []
            view = _node_view(dep, node.node_id)
            assert not view["live"] and "stopped answering" in view["lost"]

            # the agent comes back (same id, a new port): a new registration, in placement again
            again = NodeProc(dep.data_dir, dep.data_dir / "secret", node_id=node.node_id, control_plane=dep.url)
            again.start()
            dep.node = again
            wait_for_node(dep.url, dep.tokens["root"], node.node_id)
            assert _node_view(dep, node.node_id)["lost"] == ""
            fresh = alice.create_session(ENV, KWARGS)
            assert fresh["data_plane"]["node"] == node.node_id and fresh["data_plane"]["endpoint"] == again.endpoint
            alice.reset(fresh["id"], seed=0)
            assert "observation" in alice.step(fresh["id"], RIGHT)
            assert http.get(f"/v1/sessions/{sessions[0]['id']}").status_code == 410  # lost stays lost
            assert http.delete(f"/v1/sessions/{sessions[0]['id']}").status_code == 204  # and can be closed
            assert http.get(f"/v1/sessions/{sessions[0]['id']}").status_code == 404
            http.close()
            direct.close()
    finally:
        gen.close()


@pytest.mark.slow
def test_a_frozen_agent_is_lost_within_5_s_and_drops_its_sessions_when_it_thaws(cluster: Deployment) -> None:
    node = cluster.node
    assert node is not None and node.proc is not None
    with Client(cluster.url, cluster.tokens["bob"]) as bob:
        opened = bob.create_session(ENV, KWARGS)
        bob.reset(opened["id"], seed=0)
        os.kill(node.proc.pid, signal.SIGSTOP)
        try:
            took, answer = wait_lost(cluster, cluster.tokens["bob"], opened["id"])
            print(f"sessions of the frozen agent answered 410 after {took:.2f} s")
        finally:
            os.kill(node.proc.pid, signal.SIGCONT)
        assert took <= 5.0 and answer.json()["error"]["code"] == "session_lost", (took, answer.text)
        wait_for_node(cluster.url, cluster.tokens["root"], node.node_id)  # it heartbeats again: back in placement
        deadline = time.monotonic() + 10
        while httpx.get(f"{node.endpoint}/v1/node/health").json()["sessions"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert httpx.get(f"{node.endpoint}/v1/node/health").json()["sessions"] == 0  # told to forget them
        again = bob.create_session(ENV, KWARGS)
        bob.reset(again["id"], seed=0)
        assert "observation" in bob.step(again["id"], RIGHT)
        bob.close_session(again["id"])
