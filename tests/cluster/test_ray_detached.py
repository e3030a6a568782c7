"""Node agents on Ray outlive the control plane: ``rockroll serve --ray ADDRESS`` starts them detached, a SIGKILLed
serve leaves them serving (sessions step on at their data planes), the next serve adopts them (no new actor), an
explicit stop ends them and their sandboxes, and two supervisors starting at once share one agent per Ray node."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rockroll.api.nodes.table import STALE_S
from rockroll.api.server.serve_proc import ROOT, ServerProc, create_token, sandbox_pids, scratch_dir
from rockroll.client.sdk import Client
from rockroll.sandbox.node.client import DataPlaneError, DataPlaneSession
from rockroll.sandbox.node.ray_agent import MAX_CONTROL_URLS, agent_id_for, agent_name, merged_control_plane
from tests.cluster.conftest import ENV, KWARGS, loopback_ray_cluster, node_views, wait_live_nodes
from tests.cluster.test_node_loss import running

pytest.importorskip("ray.cluster_utils")

NOOP = "no answer"  # an invalid answer: a step that moves nothing, so no episode ends mid-test
NOWHERE = "http://127.0.0.1:9"  # a control plane that does not answer (the agents' heartbeats just fail)

# a Ray driver of its own (a process apart from pytest): a RayNodes that adopts or starts the agents, reports
# what it holds and the named actors of the cluster, stops the agents when asked, then leaves the cluster
DRIVER = """
import json, logging, os, sys, time
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
from rockroll.api.nodes.ray import RayNodes
args = json.loads(sys.argv[1])
nodes = RayNodes(args["address"], control_url=args["url"], secret=args["secret"], state_root=args["state_root"])
nodes.start()
import ray
def named():
    return sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == "rockroll")
out = {"held": len(nodes.agents), "named": named()}
if args["stop"]:
    out["stopped"] = nodes.stop_agents()
    deadline = time.monotonic() + 20
    while named() and time.monotonic() < deadline:
        time.sleep(0.2)
    out["named_after"] = named()
nodes.close()
print(json.dumps(out), flush=True)
"""


def driver(setup: dict[str, Any], *, stop: bool = False, url: str = NOWHERE) -> subprocess.Popen[str]:
    """Start :data:`DRIVER` on the cluster of ``setup``; :func:`finish` reads its answer."""
    args = {
        "address": setup["address"],
        "url": url,
        "secret": setup["secret"],
        "state_root": str(setup["dir"] / "sb"),
        "stop": stop,
    }
    return subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(args)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def finish(proc: subprocess.Popen[str], timeout_s: float = 180.0) -> tuple[dict[str, Any], str]:
    """The driver's answer and its log, once it exited cleanly."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, f"the driver failed ({proc.returncode}):\n{err[-4000:]}"
    return json.loads(out.strip().splitlines()[-1]), err


@pytest.fixture(scope="module")
def setup() -> Iterator[dict[str, Any]]:
    """A 3-node loopback Ray cluster, a folder with the cluster secret, and the serve command line for it."""
    d = scratch_dir("rayd")  # short: sandbox socket paths
    try:
        with loopback_ray_cluster() as (cluster, workers):
            secret = secrets.token_urlsafe(32)
            (d / "secret").write_text(secret)
            extra = ["--cluster-secret-file", str(d / "secret"), "--ray", cluster.address, "--max-sandboxes", "4"]
            agents = {agent_id_for(n.node_id) for n in [cluster.head_node, *workers]}
            state: dict[str, Any] = {"address": cluster.address, "secret": secret, "dir": d, "extra": extra,
                                     "agents": agents}  # fmt: skip
            try:
                yield state
            finally:
                for server in state.get("servers", []):
                    server.cleanup()
                for agent in agents:  # the cluster's shutdown ends the agents; their sandboxes go with them
                    for pid in sandbox_pids(f"rockroll.manager=node-{agent}"):
                        with contextlib.suppress(ProcessLookupError):  # gone since the listing: dead already
                            os.kill(pid, signal.SIGKILL)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _serve(setup: dict[str, Any]) -> ServerProc:
    """A ``rockroll serve --ray`` on the cluster (the same database each time), started."""
    server = ServerProc(setup["dir"], extra=setup["extra"])
    setup.setdefault("servers", []).append(server)
    server.start()
    return server


def _labels(agents: set[str]) -> dict[str, list[int]]:
    return {a: sandbox_pids(f"rockroll.manager=node-{a}") for a in sorted(agents)}


def _heard_from(url: str, admin: str, held: dict[str, int], timeout_s: float = 60.0) -> dict[str, dict]:
    """The agents once they heartbeat to ``url`` holding ``held`` sessions each: live for longer than ``STALE_S``
    after this call (so a row left by an earlier control plane does not count) and answering with their count."""
    t0 = time.monotonic()
    views: dict[str, dict] = {}
    while time.monotonic() - t0 < timeout_s:
        views = {n["id"]: n for n in node_views(url, admin)}
        fresh = all(views.get(a, {}).get("live") and views[a]["last_seen_s"] < STALE_S for a in held)
        if fresh and time.monotonic() - t0 > STALE_S + 1 and {a: views[a]["sessions"] for a in held} == held:
            return views
        time.sleep(0.5)
    raise AssertionError(f"the agents never reported their sessions {held} to {url}: {views}")


@pytest.mark.slow
def test_agents_outlive_a_sigkilled_serve_and_the_next_serve_adopts_them(setup: dict[str, Any]) -> None:
    agents = setup["agents"]
    first = _serve(setup)
    tokens = {n: create_token(first.db_url, n, admin=n == "root") for n in ("alice", "root")}
    setup["tokens"] = tokens
    before = wait_live_nodes(first.url, tokens["root"], 3)
    assert set(before) == agents and first.log().count("started node agent") == 3, first.log()

    with Client(first.url, tokens["alice"]) as alice:
        opened = [alice.create_session(ENV, KWARGS) for _ in range(6)]
    direct = {s["id"]: DataPlaneSession(s["data_plane"]["endpoint"], s["id"], s["data_plane"]["token"]) for s in opened}
    for i, session in enumerate(direct.values()):
        session.reset(seed=i)
        session.step(NOOP)
    sandboxes = _labels(agents)
    assert sum(map(len, sandboxes.values())) >= 2, sandboxes
    setup["sessions"] = opened

    assert first.proc is not None
    os.kill(first.proc.pid, signal.SIGKILL)  # the control plane (and its Ray driver) dies at once
    first.proc.wait(timeout=30)
    answer, log = finish(driver(setup, url=first.url))  # a few seconds later: Ray had time to end owned actors
    assert answer["named"] == sorted(agent_name(a) for a in agents), answer
    assert log.count("adopted node agent") == 3 and "started node agent" not in log, log
    assert all(running(p) for pids in sandboxes.values() for p in pids), "sandboxes died with the control plane"
    for session in direct.values():  # the data plane did not notice
        assert session.step(NOOP)[0]

    second = _serve(setup)  # a new control plane on the same database, at another port
    held = {a: sum(s["data_plane"]["node"] == a for s in opened) for a in agents}
    after = _heard_from(second.url, tokens["root"], held)
    assert {a: n["endpoint"] for a, n in after.items()} == {a: n["endpoint"] for a, n in before.items()}
    assert second.log().count("adopted node agent") == 3 and "started node agent" not in second.log(), second.log()
    for session in direct.values():
        assert session.step(NOOP)[0]

    second.stop()  # a clean exit leaves the agents serving too
    for session in direct.values():
        assert session.step(NOOP)[0]
        session.close()
    assert _labels(agents) == sandboxes


def test_an_explicit_stop_ends_the_agents_and_their_sandboxes(setup: dict[str, Any]) -> None:
    if "sessions" not in setup:
        pytest.skip("stops the agents the test before left serving")
    agents, opened = setup["agents"], setup["sessions"]
    sandboxes = _labels(agents)
    assert sum(map(len, sandboxes.values())) >= 2, sandboxes

    answer, log = finish(driver(setup, stop=True))
    assert answer["held"] == 3 and answer["stopped"] == 3, answer
    assert answer["named"] == sorted(agent_name(a) for a in agents) and answer["named_after"] == [], answer
    assert log.count("adopted node agent") == 3 and "started node agent" not in log, log

    deadline = time.monotonic() + 30
    while any(running(p) for pids in sandboxes.values() for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for pids in _labels(agents).values() for p in pids if running(p)], "sandboxes outlived the stop"
    setup["stopped"] = True
    s = opened[0]
    with pytest.raises(DataPlaneError, match="cannot reach"):  # the agent's port is closed
        DataPlaneSession(s["data_plane"]["endpoint"], s["id"], s["data_plane"]["token"], timeout_s=5)


@pytest.mark.slow
def test_two_supervisors_starting_at_once_share_one_agent_per_ray_node(setup: dict[str, Any]) -> None:
    agents = setup["agents"]
    if not setup.get("stopped"):  # no agent yet on the cluster: both race to start them
        finish(driver(setup, stop=True))
    racing = [driver(setup) for _ in range(2)]
    answers = [finish(p) for p in racing]
    logs = "".join(log for _answer, log in answers)
    for answer, _log in answers:
        assert answer["held"] == 3 and answer["named"] == sorted(agent_name(a) for a in agents), answer
    assert logs.count("started node agent") == 3 and logs.count("adopted node agent") == 3, logs

    answer, _log = finish(driver(setup, stop=True))
    assert answer["stopped"] == 3 and answer["named_after"] == [], answer


def test_an_adopting_control_plane_goes_first_among_the_agents_heartbeat_targets() -> None:
    a, b, c = "http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003"
    assert merged_control_plane(a, a + "/") == a  # named already: unchanged (no new heartbeat)
    assert merged_control_plane(f"{a},{b}", b) == f"{a},{b}"  # replicas given the same list
    assert merged_control_plane(a, b) == f"{b},{a}"  # a restart elsewhere: the old one stays behind
    assert merged_control_plane(f"{a},{b}", f"{c},{a}") == f"{c},{a},{b}"
    many = ",".join(f"http://127.0.0.1:{9000 + i}" for i in range(MAX_CONTROL_URLS))
    assert merged_control_plane(many, c).split(",") == [c, *many.split(",")[: MAX_CONTROL_URLS - 1]]
    assert merged_control_plane(a, " , ") == a
