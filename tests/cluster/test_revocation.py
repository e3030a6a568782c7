"""Revoking an owner's API token reaches the open data-plane sockets and direct steps at the agents within 1 s,
on a standalone ``rockroll node`` and on the embedded agent alike; the owner's other tokens keep working."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from sqlalchemy import select
from websockets.exceptions import ConnectionClosed

from rockroll.api.db import Database, TokenRecord
from rockroll.api.server.auth import hash_token, revoke_token
from rockroll.api.server.serve_proc import create_token
from rockroll.client.sdk import Client
from rockroll.sandbox.node.client import BatchStepper, DataPlaneError, DataPlaneSession
from tests.cluster.conftest import ENV, KWARGS, Deployment

RIGHT = "<answer>Right</answer>"


def _token_id(db: Database, token: str) -> str:
    with db.session() as s:
        return s.scalars(select(TokenRecord.id).where(TokenRecord.token_hash == hash_token(token))).one()


def _close_watcher(s: DataPlaneSession, out: dict) -> threading.Thread:
    """A thread that waits (at most 10 s) on the idle socket of ``s`` and notes when and how it closed."""
    ws = s._ws
    assert ws is not None

    def run() -> None:
        try:
            while True:
                out.setdefault("messages", []).append(ws.recv(timeout=10))
        except ConnectionClosed as e:
            out["closed_at"], out["code"] = time.monotonic(), e.rcvd.code if e.rcvd else None
            out["reason"] = e.rcvd.reason if e.rcvd else ""
        except TimeoutError:
            out["timeout"] = True

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("where", ["cluster", "embedded"])
def test_a_revoked_api_token_closes_its_data_plane_sockets_within_1_s(
    where: str, request: pytest.FixtureRequest
) -> None:
    dep: Deployment = request.getfixturevalue(where)
    owner = f"carol-{where}"
    doomed, kept = create_token(dep.server.db_url, owner), create_token(dep.server.db_url, owner)
    db = Database(dep.server.db_url)
    with Client(dep.url, doomed) as c, Client(dep.url, kept) as c2:
        opened = c.create_session(ENV, KWARGS)
        other = c.create_session(ENV, KWARGS)
        survivor = c2.create_session(ENV, KWARGS)
        dp, odp, sdp = opened["data_plane"], other["data_plane"], survivor["data_plane"]
        s = DataPlaneSession(dp["endpoint"], opened["id"], dp["token"])
        s.reset(seed=0)
        s.step(RIGHT)
        batch = BatchStepper(odp["endpoint"])
        assert "observation" in batch.step([{"token": odp["token"], "op": "reset", "seed": 0}])[0]
        assert "seq" in batch.step([{"token": odp["token"], "seq": 1, "action": RIGHT}])[0]
        keep = DataPlaneSession(sdp["endpoint"], survivor["id"], sdp["token"])
        keep.reset(seed=0)

        seen: dict = {}
        watcher = _close_watcher(s, seen)
        time.sleep(0.3)  # the socket is idle, waiting for a message
        t0 = time.monotonic()
        assert revoke_token(db, _token_id(db, doomed))  # what `rockroll token revoke` does
        watcher.join(timeout=10)
        took = seen["closed_at"] - t0
        print(f"{where}: the idle socket closed {took:.3f} s after the revocation")
        assert (seen["code"], seen["reason"]) == (4401, "token_revoked"), seen
        assert took <= 1.0, f"{where}: the socket closed {took:.2f} s after the revocation"
        assert '"token_revoked"' in seen["messages"][-1]

        # direct steps with a session token asked with the revoked token: refused, nothing stepped
        refused = batch.step([{"token": odp["token"], "seq": 2, "action": RIGHT}])[0]
        assert (refused["status"], refused["error"]["code"]) == (401, "token_revoked"), refused
        with pytest.raises(DataPlaneError) as e:
            DataPlaneSession(dp["endpoint"], opened["id"], dp["token"])
        assert (e.value.status, e.value.code) == (401, "token_revoked")
        # the owner's other token, and the sessions asked with it, keep working
        assert keep.step_raw(RIGHT)["seq"] == 1
        c2.close_session(survivor["id"])
        keep.close()
        batch.close()
        s.close()
    db.close()


def test_the_agents_revocation_route_needs_the_secret_and_a_list(cluster: Deployment) -> None:
    assert cluster.node is not None
    url = f"{cluster.node.endpoint}/v1/node/admin/revoked"
    auth = {"Authorization": f"Bearer {cluster.secret}"}
    assert httpx.post(url, json={"token_ids": ["x"]}).status_code == 401
    for bad in ({"token_ids": "x"}, {"token_ids": [1]}, {}, []):
        r = httpx.post(url, json=bad, headers=auth)
        assert r.status_code == 422 and "token_ids" in r.json()["error"]["message"], r.text
    assert httpx.post(url, json={"token_ids": []}, headers=auth).json() == {"closed": 0}
