"""Item 9: on shutdown a server stops what it runs when told to (``stop_sandboxes_on_exit``), and
otherwise leaves its sandboxes to the next server on the database, which adopts them."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from rockroll.api.app import create_app
from rockroll.sandbox.process import ProcessBackend
from tests.api.conftest import make_settings


def _running(data_dir: Path, manager: str) -> list[str]:
    return [h.sandbox_id for h in ProcessBackend(state_dir=str(data_dir / "sb")).list_managed(manager)]


def test_shutdown_stops_the_sandboxes_when_told_and_leaves_them_for_adoption_otherwise(data_dir: Path) -> None:
    settings = make_settings(data_dir, dev_mode=True, pool_size=1)
    with TestClient(create_app(settings)) as c:
        manager = c.app.state.rr.placement.manager.config.name
        sid = c.post("/v1/sessions", json={"env": "FrozenLake-v0"}).json()["sandbox_id"]
        assert sid in _running(data_dir, manager)
    assert sid in _running(data_dir, manager)  # left up: the next server adopts it
    told = make_settings(data_dir, dev_mode=True, pool_size=1, stop_sandboxes_on_exit=True)
    with TestClient(create_app(told)) as c:
        assert sid in {sb.id for sb in c.app.state.rr.placement.list()}  # adopted, same id
    assert _running(data_dir, manager) == []  # stopped with the server: no process left
