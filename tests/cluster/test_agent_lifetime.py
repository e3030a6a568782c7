"""Sandboxes live as long as their node agent: a SIGKILLed agent leaves no sandbox process behind,
and the control plane answers its sessions 410 sandbox_lost."""

from __future__ import annotations

import os
import signal
import time

import pytest

from rockroll.api.server.serve_proc import sandbox_pids
from rockroll.client.sdk import ApiClientError, Client
from tests.cluster.conftest import ENV, KWARGS, _deployment


def test_a_sigkilled_agent_takes_its_process_sandboxes_with_it() -> None:
    gen = _deployment("sigkill", standalone=True)
    dep = next(gen)
    try:
        assert dep.node is not None and dep.node.proc is not None
        with Client(dep.url, dep.tokens["alice"]) as alice, Client(dep.url, dep.tokens["bob"]) as bob:
            sessions = [alice.create_session(ENV, KWARGS) for _ in range(2)] + [bob.create_session(ENV, KWARGS)]
            assert {s["data_plane"]["node"] for s in sessions} == {dep.node.node_id}
            for s in sessions:
                alice_or_bob = bob if s is sessions[-1] else alice
                alice_or_bob.reset(s["id"], seed=1)
            servers = sandbox_pids(dep.node.label)
            assert len(servers) >= 2, "one sandbox per owner at least"
            os.kill(dep.node.proc.pid, signal.SIGKILL)
            dep.node.proc.wait(timeout=10)
            deadline = time.monotonic() + 10
            while sandbox_pids(dep.node.label) and time.monotonic() < deadline:
                time.sleep(0.1)
            left = sandbox_pids(dep.node.label) + sandbox_pids(str(dep.node.state_dir))
            assert left == [], f"sandbox processes outlived their agent: {left}"
            with pytest.raises(ApiClientError) as e:
                alice.step(sessions[0]["id"], "no answer")
            # 410 either way: sandbox_lost (the agent did not answer the proxied step) until the control plane
            # has declared the node lost, session_lost after (tests/cluster/test_node_loss.py)
            assert e.value.status == 410 and e.value.code in ("sandbox_lost", "session_lost"), e.value
            assert "unreachable" in e.value.message or "stopped answering" in e.value.message
    finally:
        gen.close()
