"""``PUT /v1/nodes/{id}`` and ``GET /v1/nodes``: node agents register with the cluster secret; bad input is 4xx."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rockroll.api.nodes.ray import ray_init_args
from rockroll.api.server.app import create_app
from rockroll.api.server.auth import create_token, list_tokens, revoke_token
from tests.api.conftest import make_settings

SECRET = secrets.token_urlsafe(32)
NODE = {"endpoint": "http://127.0.0.1:9", "capacity": 8}


@pytest.fixture()
def client(data_dir: Path) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(data_dir, dev_mode=True, cluster_secret=SECRET))) as c:
        yield c


def _put(c: TestClient, node_id: str, body: dict, secret: str = SECRET) -> object:
    return c.put(f"/v1/nodes/{node_id}", json=body, headers={"Authorization": f"Bearer {secret}"})


def test_a_node_registers_with_the_secret_and_is_listed(client: TestClient) -> None:
    r = _put(client, "n-1", NODE)
    assert r.status_code == 200 and r.json()["id"] == "n-1"
    nodes = {n["id"]: n for n in client.get("/v1/nodes").json()["nodes"]}
    assert nodes["n-1"]["live"] and nodes["n-1"]["capacity"] == 8 and not nodes["n-1"]["embedded"]
    assert nodes["local"]["embedded"]


@pytest.mark.parametrize(
    ("node_id", "body", "secret", "status"),
    [
        ("n1", NODE, "wrong-" + SECRET, 401),
        ("n1", NODE, "", 401),
        ("bad id!", NODE, SECRET, 422),
        ("x" * 65, NODE, SECRET, 422),
        ("n1", {"endpoint": "ftp://x", "capacity": 8}, SECRET, 422),
        ("n1", {"endpoint": "http://127.0.0.1:9", "capacity": 0}, SECRET, 422),
        ("n1", NODE | {"extra": 1}, SECRET, 422),
        ("local", NODE, SECRET, 409),  # the embedded node's id
    ],
    # named, not by value: the secret is random per process, and parallel workers must collect the same ids
    ids=["wrong-secret", "no-secret", "bad-id", "long-id", "bad-endpoint", "no-capacity", "extra-field", "local-id"],
)
def test_bad_registrations_are_refused(client: TestClient, node_id: str, body: dict, secret: str, status: int) -> None:
    r = _put(client, node_id, body, secret)
    assert r.status_code == status, r.text
    assert "error" in r.json()
    assert "n1" not in {n["id"] for n in client.get("/v1/nodes").json()["nodes"]}


def test_a_session_token_is_refused_for_a_session_without_a_data_plane(client: TestClient) -> None:
    r = client.post("/v1/sessions/se-0000/token")
    assert r.status_code == 404


def test_the_heartbeat_answer_lists_revoked_api_tokens(client: TestClient) -> None:
    db = client.app.state.rr.db
    create_token(db, "dora")
    tid = next(t.id for t in list_tokens(db) if t.name == "dora")
    assert tid not in _put(client, "n-2", NODE).json()["revoked"]
    assert revoke_token(db, tid)
    deadline = time.monotonic() + 5
    while tid not in _put(client, "n-2", NODE).json()["revoked"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tid in _put(client, "n-2", NODE).json()["revoked"]
    assert tid in client.app.state.rr.agent.revoked  # the embedded agent was told directly


def test_the_cluster_reports_a_node_lost_with_the_secret(client: TestClient) -> None:
    assert _put(client, "n-3", NODE).status_code == 200
    auth = {"Authorization": f"Bearer {SECRET}"}
    assert client.post("/v1/nodes/n-3/lost", json={"reason": "gone"}).status_code == 401
    assert client.post("/v1/nodes/n-3/lost", json={"reason": ""}, headers=auth).status_code == 422
    assert client.post("/v1/nodes/n-3/lost", json={"reason": "x", "y": 1}, headers=auth).status_code == 422
    assert client.post("/v1/nodes/nope/lost", json={"reason": "gone"}, headers=auth).status_code == 404
    assert client.post("/v1/nodes/n-3/lost", json={"reason": "its Ray node left"}, headers=auth).json() == {
        "lost": True
    }
    assert client.post("/v1/nodes/n-3/lost", json={"reason": "again"}, headers=auth).json() == {"lost": False}
    view = {n["id"]: n for n in client.get("/v1/nodes").json()["nodes"]}["n-3"]
    assert not view["live"] and view["lost"] == "its Ray node left"
    again = _put(client, "n-3", NODE).json()  # it registers again: back, told to drop what it holds
    assert again["forget_sessions"] is True
    assert {n["id"]: n for n in client.get("/v1/nodes").json()["nodes"]}["n-3"]["live"]


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("local", {"address": "local", "_node_ip_address": "127.0.0.1"}),  # a new cluster, never one found here
        ("127.0.0.1:6379", {"address": "127.0.0.1:6379", "_node_ip_address": "127.0.0.1"}),
        ("10.0.0.5:6379", {"address": "10.0.0.5:6379"}),
        ("auto", {"address": "auto"}),
    ],
)
def test_ray_addresses(address: str, expected: dict) -> None:
    args = ray_init_args(address)
    assert {k: v for k, v in args.items() if k in ("address", "_node_ip_address")} == expected


@pytest.mark.parametrize("address", ["", "10.0.0.5 6379"])
def test_bad_ray_addresses_are_refused(address: str) -> None:
    with pytest.raises(ValueError, match="--ray takes"):
        ray_init_args(address)


def test_an_agent_that_restarted_loses_the_sessions_of_its_old_process(client: TestClient) -> None:
    assert _put(client, "n-4", NODE | {"boot": "a"}).status_code == 200
    nodes = client.app.state.rr.nodes
    old = nodes.get("n-4").admin
    assert _put(client, "n-4", NODE | {"boot": "a"}).status_code == 200 and nodes.get("n-4").admin is old
    assert _put(client, "n-4", NODE | {"boot": "b"}).json()["forget_sessions"] is False  # same port, new process
    assert "restarted" in old.lost and nodes.get("n-4").admin is not old and not nodes.get("n-4").lost
    assert _put(client, "n-4", NODE | {"boot": "x" * 65}).status_code == 422


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        ({"env": "FrozenLake-v0", "group": "no spaces"}, {}),
        ({"env": "FrozenLake-v0", "group": "g" * 129}, {}),
        ({"env": "FrozenLake-v0", "avoid_nodes": ["bad id!"]}, {}),
        ({"env": "FrozenLake-v0", "avoid_nodes": ["n"] * 65}, {}),
        ({"env": "FrozenLake-v0"}, {"Idempotency-Key": "k" * 65}),
        ({"env": "FrozenLake-v0"}, {"Idempotency-Key": "no spaces"}),
    ],
)
def test_bad_placement_hints_are_refused_and_open_nothing(client: TestClient, body: dict, headers: dict) -> None:
    r = client.post("/v1/sessions", json=body, headers=headers)
    assert r.status_code == 422, r.text
    assert "error" in r.json()
    assert client.get("/v1/sessions").json()["sessions"] == []


def test_an_open_resent_with_its_idempotency_key_answers_the_same_session(client: TestClient) -> None:
    key = {"Idempotency-Key": "k-" + secrets.token_hex(8)}
    first = client.post("/v1/sessions", json={"env": "FrozenLake-v0"}, headers=key).json()
    again = client.post("/v1/sessions", json={"env": "FrozenLake-v0"}, headers=key).json()
    assert again["id"] == first["id"]
    assert [s["id"] for s in client.get("/v1/sessions").json()["sessions"]] == [first["id"]]
    assert client.delete(f"/v1/sessions/{first['id']}").status_code == 204
    gone = client.post("/v1/sessions", json={"env": "FrozenLake-v0"}, headers=key)
    assert gone.status_code == 404, gone.text  # a closed session is not opened again under its key
