"""The control plane's warm pool (``warm_pool_size``): sessions and sandboxes are drawn from started sandboxes."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient

from rockroll.api.server.app import create_app

from .conftest import make_settings


def _wait(cond, deadline_s: float, what: str) -> None:
    end = time.monotonic() + deadline_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s} s waiting for {what}")
        time.sleep(0.05)


def _idle_ids(manager) -> set[str]:
    with manager.warm._lock:
        return {w.sandbox_id for q in manager.warm._idle.values() for w in q}


def test_a_session_is_drawn_from_the_warm_pool_and_the_pool_refills(data_dir: Path) -> None:
    settings = make_settings(data_dir, dev_mode=True, warm_pool_size=1)
    with TestClient(create_app(settings)) as c:
        manager = c.app.state.rr.placement.manager
        _wait(lambda: manager.warm.idle() >= 1, 120, "a warm sandbox")
        warm_ids = _idle_ids(manager)
        r = c.post("/v1/sessions", json={"env": "FrozenLake-v0"})
        assert r.status_code == 201, r.text
        sandbox = r.json()["sandbox_id"]
        assert sandbox in warm_ids, "the session's sandbox should be the warm one"
        step = c.post(f"/v1/sessions/{r.json()['id']}/reset", json={"seed": 0})
        assert step.status_code == 200, step.text
        _wait(lambda: manager.warm.idle() >= 1, 120, "the pool to refill")
        assert sandbox not in _idle_ids(manager)
        c.delete(f"/v1/sessions/{r.json()['id']}")
        for sb in c.app.state.rr.placement.list():
            c.app.state.rr.placement.delete(sb.id)
