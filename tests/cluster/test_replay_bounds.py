"""Replay records at a real node agent are bounded in bytes: a step whose answer is over the bound is
delivered, and a replay of its number is refused (409 ``replay_not_kept``), not stepped again and not
answered wrongly (issue 35, hole B)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from rockroll.sandbox.node.client import DataPlaneError, DataPlaneSession
from tests.cluster.standalone_agent import Agent, standalone_agent

RIGHT, DOWN = "<answer>Right</answer>", "<answer>Down</answer>"


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROCKROLL_REPLAY_SESSION_BYTES", "256")  # below any step answer of the env
        mp.setenv("ROCKROLL_REPLAY_TOTAL_BYTES", "4096")
        with standalone_agent("replay-bounds") as a:
            yield a


def test_a_step_not_kept_is_delivered_and_its_replay_is_refused_on_the_socket(agent: Agent) -> None:
    sid, token = agent.open_session()
    s = DataPlaneSession(agent.endpoint, sid, token)
    try:
        s.reset(seed=1)
        first = s.step_raw(RIGHT)
        assert first["seq"] == 1 and "observation" in first  # delivered whole
        state = s.get_state()
        with pytest.raises(DataPlaneError) as e:
            s.step_raw(DOWN, seq=1)
        assert (e.value.status, e.value.code) == (409, "replay_not_kept")
        assert e.value.details == {"session_id": sid, "got": 1, "expected": 2}
        assert "not kept" in e.value.message
        assert s.get_state() == state  # not stepped again
        assert s.step_raw(DOWN, seq=2)["seq"] == 2
    finally:
        s.close()


def test_a_step_not_kept_is_refused_in_a_batch_too(agent: Agent) -> None:
    _sid, token = agent.open_session()
    url = f"{agent.endpoint}/v1/node/step"

    def one(item: dict) -> dict:
        resp = httpx.post(url, content=json.dumps({"steps": [item | {"token": token}]}), timeout=60)
        assert resp.status_code == 200, resp.text
        return resp.json()["results"][0]

    one({"op": "reset", "seed": 1})
    assert one({"op": "step", "seq": 1, "action": RIGHT})["seq"] == 1
    again = one({"op": "step", "seq": 1, "action": RIGHT})
    assert again["status"] == 409 and again["error"]["code"] == "replay_not_kept", again
    assert "Traceback" not in agent.log()
