"""Issue 13, item 5: nobody holds a sandbox forever; its lifetime (``ttl_s``) is the server's to cap.

Attacks on the app (real SQLite, real process sandboxes): bob asks for a sandbox that lives longer
than ``max_sandbox_ttl_s`` (422 ``over_cap`` naming ``ttl_s`` and ``ROCKROLL_MAX_SANDBOX_TTL_S``, nothing
started); a sandbox made without ``ttl_s`` gets the server's default (its ``expires_at`` in its view);
a sandbox with a short lifetime is stopped by the server once it is over, and every call naming it
(show, exec, files, restart, delete) answers 404 ``sandbox_expired``, while the listing leaves it out.
The lifetime survives a server restart (the record keeps ``expires_at``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rockroll.api.db import SandboxOwner
from rockroll.api.sandboxes.ttl import EXPIRED_KEPT_S
from rockroll.api.server.app import create_app
from rockroll.api.server.auth import create_token
from rockroll.api.server.settings import Settings
from tests.api.conftest import make_settings

CAP_S, DEFAULT_S = 30.0, 20.0


def _settings(data_dir: Path, **kw: object) -> Settings:
    return make_settings(data_dir, max_sandbox_ttl_s=CAP_S, sandbox_ttl_s=DEFAULT_S, max_memory_mb=256, **kw)


@pytest.fixture()
def app(data_dir: Path) -> Iterator[tuple[TestClient, dict[str, dict[str, str]]]]:
    with TestClient(create_app(_settings(data_dir))) as c:
        db = c.app.state.rr.db
        who = {n: {"Authorization": f"Bearer {create_token(db, n)}"} for n in ("alice", "bob")}
        yield c, who
        for sb in c.app.state.rr.placement.list():
            c.app.state.rr.placement.delete(sb.id)


def _live(c: TestClient) -> set[str]:
    return {sb.id for sb in c.app.state.rr.placement.list()}


def test_a_lifetime_over_the_cap_is_422_naming_it(app) -> None:
    c, who = app
    before = _live(c)
    over = c.post("/v1/sandboxes", json={"ttl_s": CAP_S + 1, "memory_mb": 128}, headers=who["bob"])
    assert over.status_code == 422, over.text
    err = over.json()["error"]
    assert err["code"] == "over_cap" and "ttl_s" in err["message"] and "ROCKROLL_MAX_SANDBOX_TTL_S" in err["message"]
    assert err["details"]["caps"] == [
        {"field": "ttl_s", "requested": CAP_S + 1, "cap": CAP_S, "setting": "ROCKROLL_MAX_SANDBOX_TTL_S"}
    ]
    assert _live(c) == before  # nothing was started
    for bad in (0, -5, "forever"):
        assert c.post("/v1/sandboxes", json={"ttl_s": bad}, headers=who["bob"]).status_code == 422


def test_the_default_lifetime_is_the_servers_and_shown(app) -> None:
    c, who = app
    t0 = time.time()
    made = c.post("/v1/sandboxes", json={"memory_mb": 128}, headers=who["alice"])
    assert made.status_code == 201, made.text
    sb = made.json()
    assert t0 + DEFAULT_S <= sb["expires_at"] <= time.time() + DEFAULT_S
    shown = c.get(f"/v1/sandboxes/{sb['id']}", headers=who["alice"]).json()
    listed = c.get("/v1/sandboxes", headers=who["alice"]).json()["sandboxes"]
    assert shown["expires_at"] == sb["expires_at"] == next(s["expires_at"] for s in listed if s["id"] == sb["id"])
    assert c.delete(f"/v1/sandboxes/{sb['id']}", headers=who["alice"]).status_code == 204


def test_an_expired_sandbox_is_stopped_and_answers_expired(app) -> None:
    c, who = app
    made = c.post("/v1/sandboxes", json={"ttl_s": 2, "memory_mb": 128}, headers=who["bob"])
    assert made.status_code == 201, made.text
    sid = made.json()["id"]
    ran = c.post(f"/v1/sandboxes/{sid}/exec", json={"cmd": "echo hi"}, headers=who["bob"])
    assert ran.status_code == 200 and ran.json()["stdout"].strip() == "hi"  # usable while it lives
    deadline, polls = time.monotonic() + 30, 0
    while sid in _live(c):  # the reaper stops it (about a second after its lifetime is over)
        polls += 1
        assert time.monotonic() < deadline and polls < 300, "the expired sandbox is still running"
        time.sleep(0.1)
    assert time.time() >= made.json()["expires_at"]
    calls = [
        c.get(f"/v1/sandboxes/{sid}", headers=who["bob"]),
        c.post(f"/v1/sandboxes/{sid}/exec", json={"cmd": "true"}, headers=who["bob"]),
        c.get(f"/v1/sandboxes/{sid}/files", params={"path": "x"}, headers=who["bob"]),
        c.post(f"/v1/sandboxes/{sid}/restart", headers=who["bob"]),
        c.delete(f"/v1/sandboxes/{sid}", headers=who["bob"]),
    ]
    for r in calls:
        assert (r.status_code, r.json()["error"]["code"]) == (404, "sandbox_expired"), r.text
        assert "expired" in r.json()["error"]["message"]
    other = c.get(f"/v1/sandboxes/{sid}", headers=who["alice"])  # another owner learns nothing
    assert (other.status_code, other.json()["error"]["code"]) == (404, "sandbox_not_found")
    assert sid not in {s["id"] for s in c.get("/v1/sandboxes", headers=who["bob"]).json()["sandboxes"]}
    assert c.app.state.rr.expiry.expired >= 1


def test_expired_records_are_dropped_after_a_while(app) -> None:
    """The record that says 'expired' is kept EXPIRED_KEPT_S, then dropped (the table does not grow)."""
    c, who = app
    sid = c.post("/v1/sandboxes", json={"ttl_s": 1, "memory_mb": 128}, headers=who["bob"]).json()["id"]
    reaper = c.app.state.rr.expiry
    later = time.time() + 2
    assert reaper.reap(now=later) in ([sid], [])  # [] when the reaper's own thread got there first
    assert sid not in _live(c)
    reaper.reap(now=later + EXPIRED_KEPT_S + 1)
    with c.app.state.rr.db.session() as s:
        assert s.get(SandboxOwner, sid) is None
    gone = c.get(f"/v1/sandboxes/{sid}", headers=who["bob"])
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "sandbox_not_found")


def test_a_lifetime_survives_a_server_restart(data_dir: Path) -> None:
    """A restarted server adopts the sandbox with its record, and stops it when its lifetime is over."""
    with TestClient(create_app(_settings(data_dir, stop_sandboxes_on_exit=False))) as c:
        token = create_token(c.app.state.rr.db, "bob")
        made = c.post(
            "/v1/sandboxes", json={"ttl_s": 4, "memory_mb": 128}, headers={"Authorization": f"Bearer {token}"}
        )
        assert made.status_code == 201, made.text
        sid, expires_at = made.json()["id"], made.json()["expires_at"]
    with TestClient(create_app(_settings(data_dir))) as c:
        try:
            deadline, polls = time.monotonic() + 30, 0
            while sid in _live(c):
                polls += 1
                assert time.monotonic() < deadline and polls < 300, "the adopted sandbox outlived its lifetime"
                time.sleep(0.1)
            assert time.time() >= expires_at
            r = c.get(f"/v1/sandboxes/{sid}", headers={"Authorization": f"Bearer {token}"})
            assert (r.status_code, r.json()["error"]["code"]) == (404, "sandbox_expired")
        finally:
            for sb in c.app.state.rr.placement.list():
                c.app.state.rr.placement.delete(sb.id)


def test_the_default_caps() -> None:
    s = Settings()
    assert (s.sandbox_ttl_s, s.max_sandbox_ttl_s) == (3600.0, 86400.0)
