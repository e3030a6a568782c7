"""Ray as the cluster: ``rockroll serve --ray ADDRESS`` runs one node agent per Ray node of a 3-node
``ray.cluster_utils.Cluster`` (head and 2 workers, all on 127.0.0.1); sessions spread by capacity, and a
node removed mid-way has its sessions answer 410 and its sandboxes gone within 10 s."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rockroll.api.server.serve_proc import ServerProc, create_token, sandbox_pids, scratch_dir
from rockroll.client.sdk import Client
from rockroll.sandbox.node.ray_agent import agent_id_for
from tests.cluster.conftest import ENV, KWARGS, loopback_ray_cluster, wait_live_nodes
from tests.cluster.test_node_loss import running

ray_cluster_utils = pytest.importorskip("ray.cluster_utils")

RIGHT = "<answer>Right</answer>"
SESSIONS = 30


def _nodes(url: str, admin: str) -> list[dict]:
    return httpx.get(f"{url}/v1/nodes", headers={"Authorization": f"Bearer {admin}"}, timeout=10).json()["nodes"]


@pytest.fixture(scope="module")
def ray_deployment() -> Iterator[dict[str, Any]]:
    """A 3-node Ray cluster on loopback (its files in a private RAY_TMPDIR, so no other ``ray.init`` on this
    machine finds it) and a control plane with ``--ray`` pointed at it."""
    d = scratch_dir("ray")
    try:
        with loopback_ray_cluster() as (cluster, workers):
            server = None
            try:
                (d / "secret").write_text(secrets.token_urlsafe(32))
                extra = ["--cluster-secret-file", str(d / "secret"), "--ray", cluster.address]
                server = ServerProc(d, extra=extra + ["--max-sessions-per-sandbox", "16", "--max-sandboxes", "4"])
                tokens = {n: create_token(server.db_url, n, admin=n == "root") for n in ("alice", "root")}
                url = server.start()
                try:
                    wait_live_nodes(url, tokens["root"], 3)
                except AssertionError as e:
                    raise AssertionError(f"3 Ray node agents never registered: {e}\n{server.log()}") from None
                yield {"cluster": cluster, "workers": workers, "server": server, "url": url, "tokens": tokens}
            finally:
                if server is not None:
                    server.cleanup()  # the agents (detached) serve on until the cluster shuts down
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.slow
def test_one_agent_per_ray_node_sessions_spread_and_a_removed_node_loses_only_its_sessions(
    ray_deployment: dict[str, Any],
) -> None:
    url, tokens, cluster = ray_deployment["url"], ray_deployment["tokens"], ray_deployment["cluster"]
    nodes = {n["id"]: n for n in _nodes(url, tokens["root"])}
    expected = {agent_id_for(cluster.head_node.node_id)} | {agent_id_for(w.node_id) for w in ray_deployment["workers"]}
    assert set(nodes) == expected and all(n["endpoint"].startswith("http://127.0.0.1:") for n in nodes.values())

    with Client(url, tokens["alice"]) as alice:
        opened = [alice.create_session(ENV, KWARGS) for _ in range(SESSIONS)]
        per_node = Counter(s["data_plane"]["node"] for s in opened)
        print(f"sessions per node agent: {dict(per_node)}")
        assert set(per_node) == expected and max(per_node.values()) <= 0.4 * SESSIONS, per_node
        for s in opened:
            alice.reset(s["id"], seed=1)

        victim = ray_deployment["workers"][0]
        victim_agent = agent_id_for(victim.node_id)
        label = f"rockroll.manager=node-{victim_agent}"
        pids = sandbox_pids(label)
        assert pids, "the victim node hosts sandboxes"
        lost = [s["id"] for s in opened if s["data_plane"]["node"] == victim_agent]
        kept = [s["id"] for s in opened if s["data_plane"]["node"] != victim_agent]

        t0 = time.monotonic()
        cluster.remove_node(victim)
        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens['alice']}"}, timeout=10)
        pending = set(lost)
        while (pending or any(running(p) for p in pids)) and time.monotonic() - t0 < 10:
            pending = {sid for sid in pending if http.get(f"/v1/sessions/{sid}").status_code != 410}
            time.sleep(0.1)
        took = time.monotonic() - t0
        print(f"node removed: its {len(lost)} sessions answered 410 and its sandboxes were gone after {took:.2f} s")
        assert not pending, f"still answering after 10 s: {pending}"
        assert [p for p in pids if running(p)] == [], "the removed node's sandboxes outlived it"
        err = http.post(f"/v1/sessions/{lost[0]}/step", json={"action": RIGHT}).json()["error"]
        assert err["code"] == "session_lost" and victim_agent in err["message"], err
        for sid in kept:  # the other nodes' sessions play on
            assert "observation" in alice.step(sid, RIGHT)
        again = [alice.create_session(ENV, KWARGS) for _ in range(6)]  # placed on the live nodes only
        assert victim_agent not in {s["data_plane"]["node"] for s in again}
        view = {n["id"]: n for n in _nodes(url, tokens["root"])}[victim_agent]
        assert not view["live"] and view["lost"], view
        for s in again + [{"id": sid} for sid in opened_ids(opened)]:
            assert http.delete(f"/v1/sessions/{s['id']}").status_code in (204, 404)
        http.close()


def opened_ids(opened: list[dict]) -> list[str]:
    return [s["id"] for s in opened]


@pytest.mark.slow
def test_a_rollout_loses_no_episode_when_a_node_is_removed_mid_way(ray_deployment: dict[str, Any]) -> None:
    """The rollout layer re-places lost work: a lost session is an infra failure, retried on a fresh session."""
    from rockroll.agentrl.engines.random_engine import RandomEngine
    from rockroll.agentrl.faults.latency import Latency
    from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
    from rockroll.agentrl.rollout.scheduler import RolloutScheduler
    from rockroll.agentrl.sources.remote import RemoteSource

    url, tokens, cluster = ray_deployment["url"], ray_deployment["tokens"], ray_deployment["cluster"]
    victim = ray_deployment["workers"][1]
    victim_agent = agent_id_for(victim.node_id)
    # mostly invalid answers (no-op steps): every episode lasts its 6 turns of 0.3 s, so the removal lands mid-episode
    engine = RandomEngine(None, invalid_prob=0.8, latency=Latency("constant", 0.3), seed=3)
    config = SchedulerConfig(env_ids=[ENV], env_kwargs={ENV: KWARGS}, num_env_groups=4, group_size=4,
                             episode=EpisodeConfig(max_turns=6, max_retries=3))  # fmt: skip
    removed: list[float] = []

    def remove_when_busy() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            mine = [n for n in _nodes(url, tokens["root"]) if n["id"] == victim_agent]
            if mine and mine[0]["sessions"] > 0:
                time.sleep(0.5)
                cluster.remove_node(victim)
                removed.append(time.monotonic())
                return
            time.sleep(0.1)

    remover = threading.Thread(target=remove_when_busy, daemon=True)
    remover.start()

    async def one_batch(source: RemoteSource) -> Any:
        scheduler = RolloutScheduler(engine, source, config)
        try:
            return await scheduler.run_batch()
        finally:
            assert await scheduler.close(30)

    with Client(url, tokens["alice"]) as client:
        batch = asyncio.run(one_batch(RemoteSource(client)))
    remover.join(10)
    assert removed, "the victim node never held a session"
    trajs = [t for group in batch.groups for t in group]
    print(f"rollout: {len(trajs)} episodes, infra retries {batch.metrics['rollout/infra_retries']}")
    assert len(batch.groups) == 4 and len(trajs) == 16
    assert all(t.failure is None for t in trajs), [t.failure for t in trajs if t.failure]
    assert batch.metrics["rollout/infra_retries"] > 0
