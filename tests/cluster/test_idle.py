"""The control plane's idle reaper counts steps made directly at a node agent as use."""

from __future__ import annotations

import time

import pytest

from rockroll.client.sdk import ApiClientError, Client
from rockroll.sandbox.node.client import DataPlaneSession
from tests.cluster.conftest import ENV, KWARGS, _deployment


@pytest.mark.slow
@pytest.mark.parametrize("standalone", [True, False], ids=["standalone", "embedded"])
def test_a_session_stepped_only_at_its_agent_is_not_reaped(standalone: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKROLL_SESSION_IDLE_TTL_S", "2")  # the reaper runs every second
    gen = _deployment("idle", standalone=standalone)
    dep = next(gen)
    try:
        with Client(dep.url, dep.tokens["alice"]) as c:
            busy, idle = c.create_session(ENV, KWARGS), c.create_session(ENV, KWARGS)
            dp = busy["data_plane"]
            s = DataPlaneSession(dp["endpoint"], busy["id"], dp["token"])
            s.reset(seed=0)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # bounded: about 25 steps
                if s.step_raw("no answer")["truncated"]:
                    s.reset(seed=1)
                time.sleep(0.2)
            with pytest.raises(ApiClientError) as e:
                c.get_session(idle["id"])
            assert e.value.status == 404  # reaped: nobody used it
            assert c.get_session(busy["id"])["id"] == busy["id"]  # used at the agent: kept
            assert s.call({"op": "seq"})["last_seq"] >= 20
            s.close()
    finally:
        gen.close()
