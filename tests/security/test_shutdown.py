"""Item 9: on shutdown a server stops what it runs when told to (``stop_sandboxes_on_exit``), and
otherwise leaves its sandboxes to the next server on the database, which adopts them.

In-process (the app's lifespan) and through a real ``rockroll serve`` sent SIGTERM; real process sandboxes.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rockroll.api.server.app import create_app
from rockroll.api.server.serve_proc import ServerProc, scratch_dir
from rockroll.client.sdk import Client
from rockroll.sandbox.process import ProcessBackend
from tests.api.conftest import make_settings


def _running(data_dir: Path, manager: str) -> list[str]:
    return [h.sandbox_id for h in ProcessBackend(state_dir=str(data_dir / "sb")).list_managed(manager)]


def test_shutdown_stops_the_sandboxes_when_told_and_leaves_them_for_adoption_otherwise(data_dir: Path) -> None:
    settings = make_settings(data_dir, dev_mode=True, pool_size=1, stop_sandboxes_on_exit=False)
    with TestClient(create_app(settings)) as c:
        manager = c.app.state.rr.placement.manager.config.name
        sid = c.post("/v1/sessions", json={"env": "FrozenLake-v0"}).json()["sandbox_id"]
        assert sid in _running(data_dir, manager)
    assert sid in _running(data_dir, manager)  # left up: the next server adopts it
    told = make_settings(data_dir, dev_mode=True, pool_size=1, stop_sandboxes_on_exit=True)
    with TestClient(create_app(told)) as c:
        assert sid in {sb.id for sb in c.app.state.rr.placement.list()}  # adopted, same id
    assert _running(data_dir, manager) == []  # stopped with the server: no process left


def _sandbox_pids(sandbox_id: str) -> list[int]:
    """Host processes of sandbox ``sandbox_id`` (its command line carries its label)."""
    marker, pids = f"rockroll.sandbox={sandbox_id}".encode(), []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


@pytest.mark.parametrize("stop", [True, False])
def test_sigterm_to_rockroll_serve_stops_or_leaves_its_sandboxes_by_the_setting(
    stop: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through a real ``rockroll serve`` and the signal an operator (or systemd, Docker) sends."""
    monkeypatch.setenv("ROCKROLL_STOP_SANDBOXES_ON_EXIT", "true" if stop else "false")
    srv = ServerProc(scratch_dir("sigterm"), dev=True, extra=["--pool-size", "0"])
    try:
        srv.start()
        with Client(srv.url, None) as c:
            session = c.create_session("FrozenLake-v0")
            c.reset(session["id"], seed=0)
        sid = session["sandbox_id"]
        assert _sandbox_pids(sid)
        assert srv.proc is not None
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=90) in (0, -signal.SIGTERM), srv.log()[-2000:]
        srv.proc = None
        if stop:
            assert _sandbox_pids(sid) == [], "a sandbox outlived the server that was told to stop it"
        else:
            assert _sandbox_pids(sid), "the sandbox was stopped although the setting says leave it for adoption"
    finally:
        srv.cleanup()
    assert _sandbox_pids(sid) == []
