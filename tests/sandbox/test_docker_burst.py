"""``bench/sandboxes/docker_burst.py`` at a tiny size: a burst of Docker sandboxes all become healthy and all are removed."""

from __future__ import annotations

import docker
import pytest

from bench.sandboxes.docker_burst import burst, report, table
from rockroll.sandbox.base import SandboxSpec

pytestmark = pytest.mark.docker


def test_a_burst_of_two_docker_sandboxes_becomes_healthy_and_leaves_nothing(docker_image: str) -> None:
    r = burst(2, spec=SandboxSpec(image=docker_image), timeout_s=120)
    assert r["failed"] == [] and r["healthy"] == 2 and r["ready_at_end"] == 2
    assert len(r["times_s"]) == 2 and all(t > 0 for t in r["times_s"])
    assert r["min_s"] <= r["p50_s"] <= r["p99_s"] <= r["max_s"]
    # each phase was timed on both sandboxes, in the order the calls ran
    phases = r["phases_s"]
    assert all(phases[k]["p50"] > 0 for k in ("docker create", "docker start", "server up (start -> socket bound)"))
    assert r["is_alive_calls_p50"] >= 1
    # nothing is left: the bench's own check and the daemon's answer agree
    assert r["leftover_containers"] == [] and r["leftover_socket_dirs"] == []
    label = f"rockroll.manager={r['manager']}"
    assert docker.from_env().containers.list(all=True, filters={"label": label}) == []
    assert "2/2 healthy" in report(r)


def test_a_burst_from_a_full_warm_pool_is_handed_out_and_leaves_nothing(docker_image: str) -> None:
    r = burst(2, warm=True, spec=SandboxSpec(image=docker_image), timeout_s=120)
    assert r["mode"] == "warm" and r["failed"] == [] and r["healthy"] == 2 and r["ready_at_end"] == 2
    assert r["warm_pool"]["handed_out"] == 2 and r["fill_s"] > 0 and r["cpu_s_per_sandbox"] >= 0
    assert r["leftover_containers"] == [] and r["leftover_socket_dirs"] == []
    assert "(warm)" in report(r) and "| 2 | full |" in table([r])
