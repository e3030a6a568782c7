"""Issue 13, items 2 and 7: a sandbox serves one owner; every sandbox counts; idle ones are reaped.

Attacks: bob opens sessions of the env alice uses (built-in and custom) hoping to land in her
sandbox (to read and plant files in her sessions); bob takes every sandbox of the server so alice
gets 429; an idle custom-env pool sandbox held forever. Each runs the app in-process (TestClient)
on real SQLite with real process sandboxes.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rockroll.api.db import Database, SandboxOwner
from rockroll.api.nodes.placement import SESSION_POOL
from rockroll.api.server.app import create_app
from rockroll.api.server.auth import create_token
from tests.api.conftest import make_settings

LAKE_SOURCE = b"from rockroll.envs.frozenlake import FrozenLakeEnv\n\n\nclass Lake(FrozenLakeEnv):\n    pass\n"


class Apps:
    """Starts the app with settings overrides over one database with tokens of alice, bob and root."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        db = Database(f"sqlite:///{data_dir}/rockroll.db")
        db.migrate()
        names = ("alice", "bob", "root")
        tokens = {name: create_token(db, name, admin=name == "root") for name in names}
        db.close()
        self.who = {name: {"Authorization": f"Bearer {tok}"} for name, tok in tokens.items()}
        self.running: list[TestClient] = []

    def start(self, **overrides: Any) -> tuple[TestClient, dict[str, dict[str, str]]]:
        c = TestClient(create_app(make_settings(self.data_dir, **overrides)))
        c.__enter__()
        self.running.append(c)
        return c, self.who

    def stop(self, c: TestClient, *, stop_sandboxes: bool = True) -> None:
        self.running.remove(c)
        c.app.state.rr.placement.close(stop_sandboxes=stop_sandboxes)  # the monitor first: it refills the pool
        c.__exit__(None, None, None)


@pytest.fixture()
def apps(data_dir: Path) -> Iterator[Apps]:
    a = Apps(data_dir)
    yield a
    for c in list(a.running):
        a.stop(c)


def _open(c: TestClient, who: dict[str, str], env: str) -> dict[str, Any]:
    r = c.post("/v1/sessions", json={"env": env}, headers=who)
    assert r.status_code == 201, r.text
    return r.json()


def _register_lake(c: TestClient, who: dict[str, str]) -> str:
    """alice's custom env, shared with everyone where the server supports sharing (visibility)."""
    body = {
        "id": "Lake-v0",
        "kind": "source",
        "entry_point": "lake:Lake",
        "source_name": "lake.py",
        "source_b64": base64.b64encode(LAKE_SOURCE).decode(),
    }
    r = c.post("/v1/envs", json=body | {"visibility": "public"}, headers=who)
    if r.status_code == 422 and "visibility" in r.text:  # a server without env visibility: all envs are shared
        r = c.post("/v1/envs", json=body, headers=who)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _wait(predicate: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _owners(c: TestClient) -> dict[str, str]:
    with c.app.state.rr.db.session() as s:
        return {r.sandbox_id: r.owner for r in s.query(SandboxOwner)}


def _warm(c: TestClient) -> list[Any]:
    """The warm pool's ready members, serving nobody yet."""
    members = c.app.state.rr.placement.manager.members(SESSION_POOL)
    return [sb for sb in members if sb.state == "ready" and sb.sessions == 0]


def test_owners_never_share_a_sandbox(apps: Apps) -> None:
    c, who = apps.start(pool_size=1, max_sandboxes=8, max_sandboxes_per_owner=3)
    assert _wait(lambda: len(_warm(c)) == 1), "the warm pool did not fill"
    lake = _register_lake(c, who["alice"])
    placed: dict[str, set[str]] = {"alice": set(), "bob": set()}
    by_env: dict[tuple[str, str], set[str]] = {}
    for env in ("FrozenLake-v0", lake):
        for owner in ("alice", "bob", "alice", "bob"):
            info = _open(c, who[owner], env)
            placed[owner].add(info["sandbox_id"])
            by_env.setdefault((owner, env), set()).add(info["sandbox_id"])
            r = c.post(f"/v1/sessions/{info['id']}/reset", json={"seed": 0}, headers=who[owner])
            assert r.status_code == 200, r.text
    assert not placed["alice"] & placed["bob"], placed
    for key, sbs in by_env.items():
        assert len(sbs) == 1, (key, sbs)  # each owner's sessions of one env share that owner's sandbox
    owners = _owners(c)
    assert {owners[s] for s in placed["alice"]} == {"alice"} and {owners[s] for s in placed["bob"]} == {"bob"}
    # the admin's listing shows each session sandbox with its one owner; bob cannot see alice's
    listed = {s["id"]: s["owner"] for s in c.get("/v1/sandboxes", headers=who["root"]).json()["sandboxes"]}
    assert all(listed[s] == "alice" for s in placed["alice"]) and all(listed[s] == "bob" for s in placed["bob"])
    for sid in placed["alice"]:
        assert c.get(f"/v1/sandboxes/{sid}", headers=who["bob"]).status_code == 404
    bob_sees = {s["id"] for s in c.get("/v1/sandboxes", headers=who["bob"]).json()["sandboxes"]}
    assert not bob_sees & placed["alice"]
    # the warm sandbox alice or bob took is replaced: the pool keeps one unassigned member
    assert _wait(lambda: len(_warm(c)) == 1), "the warm pool was not refilled"
    assert not {sb.id for sb in _warm(c)} & (placed["alice"] | placed["bob"])
    pools = {p["name"]: p for p in c.get("/v1/overview", headers=who["root"]).json()["pools"]}
    assert pools[SESSION_POOL]["members"] == 3  # alice's, bob's and the warm one


def test_one_owner_cannot_take_the_server(apps: Apps) -> None:
    c, who = apps.start(pool_size=0, max_sandboxes=4, max_sandboxes_per_owner=2, max_sessions_per_sandbox=1)
    bob = [_open(c, who["bob"], "FrozenLake-v0") for _ in range(2)]
    assert len({s["sandbox_id"] for s in bob}) == 2
    r = c.post("/v1/sessions", json={"env": "FrozenLake-v0"}, headers=who["bob"])
    assert r.status_code == 429, r.text
    err = r.json()["error"]
    assert err["details"]["what"] == "sandboxes per owner" and "max_sandboxes_per_owner" in err["message"]
    # session sandboxes count against the same quota as user sandboxes
    r = c.post("/v1/sandboxes", json={}, headers=who["bob"])
    assert r.status_code == 429 and r.json()["error"]["details"]["what"] == "sandboxes per owner", r.text
    alice = _open(c, who["alice"], "FrozenLake-v0")
    assert alice["sandbox_id"] not in {s["sandbox_id"] for s in bob}
    # bob closes one session: its sandbox is still his (until reaped), so he is still at his limit
    c.delete(f"/v1/sessions/{bob[0]['id']}", headers=who["bob"])
    assert _open(c, who["bob"], "FrozenLake-v0")["sandbox_id"] == bob[0]["sandbox_id"]


def test_the_last_free_sandbox_is_kept_for_another_owner(apps: Apps) -> None:
    c, who = apps.start(pool_size=0, max_sandboxes=3, max_sandboxes_per_owner=3, max_sessions_per_sandbox=1)
    for _ in range(2):
        _open(c, who["bob"], "FrozenLake-v0")
    r = c.post("/v1/sessions", json={"env": "FrozenLake-v0"}, headers=who["bob"])
    assert r.status_code == 429 and "kept for other owners" in r.json()["error"]["message"], r.text
    _open(c, who["alice"], "FrozenLake-v0")
    r = c.post("/v1/sessions", json={"env": "FrozenLake-v0"}, headers=who["alice"])
    assert r.status_code == 429 and r.json()["error"]["details"]["what"] == "sandboxes", r.text


@pytest.mark.slow
def test_idle_custom_env_sandbox_is_reaped_and_no_longer_counted(apps: Apps) -> None:
    c, who = apps.start(pool_size=1, max_sandboxes=6, max_sandboxes_per_owner=1, sandbox_idle_ttl_s=1.0)
    placement = c.app.state.rr.placement
    lake = _register_lake(c, who["alice"])
    session = _open(c, who["alice"], lake)
    sid = session["sandbox_id"]
    assert _owners(c).get(sid) == "alice"
    # counted: alice holds her one sandbox, so she may not start another
    r = c.post("/v1/sandboxes", json={}, headers=who["alice"])
    assert r.status_code == 429 and r.json()["error"]["details"]["what"] == "sandboxes per owner", r.text
    time.sleep(2.5)  # past the TTL, but a sandbox hosting a session is never reaped
    assert sid in {sb.id for sb in placement.list()}
    assert c.delete(f"/v1/sessions/{session['id']}", headers=who["alice"]).status_code == 204
    assert _wait(lambda: sid not in {sb.id for sb in placement.list()}, 15.0), "idle sandbox was not reaped"
    # its owner record goes right after its stop (which a loaded machine can make take a while)
    assert _wait(lambda: sid not in _owners(c), 15.0), "the reaped sandbox still counts against its owner"
    assert sid not in {s["id"] for s in c.get("/v1/sandboxes", headers=who["root"]).json()["sandboxes"]}
    assert placement.reaped >= 1
    # no longer counted: alice may start a sandbox again; the warm pool kept its unassigned member
    r = c.post("/v1/sandboxes", json={}, headers=who["alice"])
    assert r.status_code == 201, r.text
    assert len(_warm(c)) == 1


def test_a_restarted_server_keeps_each_sandbox_with_its_owner(apps: Apps) -> None:
    c, who = apps.start(pool_size=1, max_sandboxes=6)
    alice = _open(c, who["alice"], "FrozenLake-v0")
    apps.stop(c, stop_sandboxes=False)  # the sandboxes stay up for the next server
    c, who = apps.start(pool_size=1, max_sandboxes=6)
    assert alice["sandbox_id"] in {sb.id for sb in c.app.state.rr.placement.list()}
    assert _owners(c)[alice["sandbox_id"]] == "alice"
    # the adopted sandbox is replaced (it held a session of the dead server), then serves alice only
    assert _wait(lambda: c.app.state.rr.placement.get(alice["sandbox_id"]).state == "ready")
    bob = _open(c, who["bob"], "FrozenLake-v0")
    assert bob["sandbox_id"] != alice["sandbox_id"]
    assert _open(c, who["alice"], "FrozenLake-v0")["sandbox_id"] == alice["sandbox_id"]
