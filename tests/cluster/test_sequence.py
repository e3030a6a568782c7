"""Step sequence numbers at the agent: a replayed number returns the recorded answer, a gap is refused."""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import ConnectionClosedError
from websockets.sync.client import connect

from rockroll.client.sdk import Client
from rockroll.sandbox.node.client import DataPlaneError, DataPlaneSession, ws_url
from rockroll.sandbox.node.sequence import REPLAY_WINDOW
from tests.cluster.conftest import ENV, KWARGS, Deployment

RIGHT, NOOP = "<answer>Right</answer>", "no answer"


def test_a_replayed_number_answers_the_recorded_step_without_stepping(cluster: Deployment) -> None:
    with Client(cluster.url, cluster.tokens["alice"]) as c:
        opened = c.create_session(ENV, KWARGS)
        sid, dp = opened["id"], opened["data_plane"]
        s = DataPlaneSession(dp["endpoint"], sid, dp["token"])
        s.reset(seed=7)
        first = s.step_raw(RIGHT)
        state = s.get_state()
        again = s.step_raw(NOOP, seq=1)  # another action under the same number: still the recorded step
        assert again == first | {"replayed": True}
        assert s.get_state() == state  # nothing stepped
        with pytest.raises(DataPlaneError) as e:
            s.step_raw(NOOP, seq=5)
        assert (e.value.status, e.value.code) == (409, "bad_sequence")
        assert e.value.details == {"session_id": sid, "got": 5, "expected": 2}
        assert "skips ahead" in e.value.message
        for _ in range(REPLAY_WINDOW + 1):
            s.step_raw(NOOP)
        with pytest.raises(DataPlaneError) as e:
            s.step_raw(NOOP, seq=1)  # out of the recorded window
        assert e.value.code == "bad_sequence" and "older than" in e.value.message
        with pytest.raises(DataPlaneError) as e:
            s.call({"op": "step", "seq": "3", "action": NOOP})
        assert e.value.code == "bad_sequence"
        with pytest.raises(DataPlaneError) as e:
            s.call({"op": "jump"})
        assert (e.value.status, e.value.code) == (422, "validation_error")
        s.close()
        c.close_session(sid)


def test_a_client_that_reconnects_after_a_drop_never_applies_a_step_twice(cluster: Deployment) -> None:
    with Client(cluster.url, cluster.tokens["alice"]) as c:
        opened = c.create_session(ENV, KWARGS)
        sid, dp = opened["id"], opened["data_plane"]
        headers = {"Authorization": f"Bearer {dp['token']}"}
        with connect(ws_url(dp["endpoint"], sid), additional_headers=headers) as ws:
            ws.send(json.dumps({"op": "reset", "seed": 2}))
            ws.recv()
            ws.send(json.dumps({"op": "step", "seq": 1, "action": RIGHT}))
            # the connection drops before the answer is read
        s = DataPlaneSession(dp["endpoint"], sid, dp["token"], first_seq=1)
        out = s.step_raw(RIGHT)  # the same number again, on a new socket
        assert out["seq"] == 1
        assert s.call({"op": "seq"})["last_seq"] == 1  # applied once, whichever way the race went
        assert s.step_raw(RIGHT, seq=1) == out | {"replayed": True}
        s.close()
        c.close_session(sid)


def test_the_client_resends_a_step_whose_answer_was_lost_and_gets_the_recorded_one(cluster: Deployment) -> None:
    with Client(cluster.url, cluster.tokens["alice"]) as c:
        opened = c.create_session(ENV, KWARGS)
        sid, dp = opened["id"], opened["data_plane"]
        s = DataPlaneSession(dp["endpoint"], sid, dp["token"])
        s.reset(seed=3)
        ws = s._ws
        assert ws is not None
        real_recv = ws.recv

        def lose_answer(timeout: float | None = None) -> str:
            real_recv(timeout=timeout)  # the agent answered (the step ran) ...
            ws.close()  # ... and the socket dropped before the client read it
            raise ConnectionClosedError(None, None)

        ws.recv = lose_answer  # type: ignore[method-assign]
        out = s.step_raw(RIGHT)  # the client reconnects and sends number 1 again
        assert out["seq"] == 1 and out["replayed"] is True
        assert s._ws is not ws and s.next_seq == 2
        assert s.call({"op": "seq"})["last_seq"] == 1  # applied once
        s.close()
        c.close_session(sid)
