"""The agent checks the signed session token: expired, forged or foreign tokens are refused and nothing is stepped."""

from __future__ import annotations

import secrets
import time

import httpx
import pytest

from rockroll.client.sdk import Client
from rockroll.sandbox.node.client import BatchStepper, DataPlaneError, DataPlaneSession
from rockroll.sandbox.node.tokens import SessionTokens
from tests.cluster.conftest import ENV, KWARGS, Deployment

NOOP = "no answer"


def _refused(endpoint: str, session_id: str, token: str) -> DataPlaneError:
    with pytest.raises(DataPlaneError) as e:
        DataPlaneSession(endpoint, session_id, token, first_seq=1).step_raw(NOOP)
    return e.value


@pytest.mark.parametrize("where", ["cluster", "embedded"])
def test_expired_forged_and_foreign_tokens_are_refused_and_step_nothing(
    where: str, request: pytest.FixtureRequest
) -> None:
    dep: Deployment = request.getfixturevalue(where)
    with Client(dep.url, dep.tokens["alice"]) as alice, Client(dep.url, dep.tokens["bob"]) as bob:
        mine = alice.create_session(ENV, KWARGS)
        theirs = bob.create_session(ENV, KWARGS)
        sid, dp = mine["id"], mine["data_plane"]
        endpoint, node = dp["endpoint"], dp["node"]
        alice.reset(sid, seed=4)
        real = SessionTokens(dep.secret)

        expired, _ = real.issue(sid, "alice", node, ttl_s=-5)
        e = _refused(endpoint, sid, expired)
        assert (e.status, e.code) == (401, "token_expired"), e

        forged, _ = SessionTokens(secrets.token_urlsafe(32)).issue(sid, "alice", node)  # another secret
        e = _refused(endpoint, sid, forged)
        assert (e.status, e.code) == (401, "invalid_token"), e
        tampered = dp["token"][:-4] + ("AAAA" if not dp["token"].endswith("AAAA") else "BBBB")
        assert _refused(endpoint, sid, tampered).status == 401
        assert _refused(endpoint, sid, "").status == 401

        e = _refused(endpoint, sid, theirs["data_plane"]["token"])  # bob's valid token on alice's session
        assert (e.status, e.code) == (404, "session_not_found"), e
        claimed, _ = real.issue(sid, "bob", node)  # a signed token naming the wrong owner
        assert _refused(endpoint, sid, claimed).status == 404
        elsewhere, _ = real.issue(sid, "alice", "another-node")
        assert _refused(endpoint, sid, elsewhere).status == 401

        b = BatchStepper(endpoint)
        out = b.step([{"token": t, "seq": 1, "action": NOOP} for t in (expired, forged, claimed)])
        assert [r["status"] for r in out] == [401, 401, 404]
        b.close()
        ws = httpx.post(
            f"{endpoint}/v1/node/step", json={"steps": "nope"}, headers={"Authorization": f"Bearer {dp['token']}"}
        )
        assert ws.status_code == 422 and ws.json()["error"]["code"] == "validation_error"

        s = DataPlaneSession(endpoint, sid, dp["token"])
        assert s.next_seq == 1  # nothing above was stepped
        first = s.step_raw(NOOP)
        assert first["seq"] == 1 and "replayed" not in first
        s.close()
        alice.close_session(sid)
        bob.close_session(theirs["id"])


def test_a_socket_closes_when_its_token_expires(embedded: Deployment) -> None:
    with Client(embedded.url, embedded.tokens["alice"]) as alice:
        opened = alice.create_session(ENV, KWARGS)
        sid = opened["id"]
        alice.reset(sid, seed=1)
        short, expires_at = SessionTokens(embedded.secret).issue(sid, "alice", "local", ttl_s=1.0)
        s = DataPlaneSession(embedded.url, sid, short, first_seq=1)
        s.step_raw(NOOP)
        s.timeout_s = 5
        time.sleep(max(0.0, expires_at - time.time()) + 0.2)  # exp is whole seconds: 1-2 s from now
        with pytest.raises(DataPlaneError) as e:
            s.step_raw(NOOP)
        assert (e.value.status, e.value.code) == (401, "token_expired")
        fresh = alice.session_token(sid)["data_plane"]["token"]  # a fresh token from the control plane
        s2 = DataPlaneSession(embedded.url, sid, fresh)
        assert s2.next_seq == 2  # the refused step was not applied
        s2.close()
        alice.close_session(sid)
