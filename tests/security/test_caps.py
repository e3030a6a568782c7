"""Issue 13, item 5: callers do not choose their own limits; the server's caps bound them.

Attacks: an ordinary owner (and an admin) asks a shared server for a sandbox with 256 GiB of
memory, 65,536 processes, 64 cores, 64 GiB of disk or a network, and for a command that runs
longer than the server allows. Each is refused with 422 ``over_cap`` naming the cap and its
setting, and starts nothing. A real ``rockroll serve`` with its default caps, then the app
in-process with caps of its own (real SQLite, real process sandboxes).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rockroll.api.server.app import create_app
from rockroll.api.server.auth import create_token
from rockroll.api.server.serve_proc import ServerProc
from rockroll.api.server.settings import Settings
from rockroll.client.sdk import ApiClientError, Client
from tests.api.conftest import make_settings

HUGE = [
    ({"memory_mb": 262_144}, "memory_mb", "ROCKROLL_MAX_MEMORY_MB"),
    ({"pids_limit": 65_536}, "pids_limit", "ROCKROLL_MAX_PIDS"),
    ({"cpus": 64}, "cpus", "ROCKROLL_MAX_CPUS"),
    ({"workspace_mb": 65_536}, "workspace_mb", "ROCKROLL_MAX_WORKSPACE_MB"),
    ({"network": True}, "network", "ROCKROLL_NETWORK_OWNERS"),
]


def _refusal(client: Client, **spec: Any) -> ApiClientError:
    with pytest.raises(ApiClientError) as info:
        client.create_sandbox(**spec)
    return info.value


@pytest.mark.parametrize(("spec", "field", "setting"), HUGE)
@pytest.mark.parametrize("who", ["alice", "root"])
def test_over_cap_sandbox_is_422_naming_the_cap(server: ServerProc, who: str, spec, field, setting) -> None:
    with Client(server.url, server.tokens[who]) as c:
        before = {s["id"] for s in c.list_sandboxes()}
        err = _refusal(c, **spec)
        assert (err.status, err.code) == (422, "over_cap")
        assert setting in err.message and field in err.message
        assert [cap["field"] for cap in err.details["caps"]] == [field]
        assert {s["id"] for s in c.list_sandboxes()} == before  # nothing was started


def test_every_cap_over_is_named(server: ServerProc) -> None:
    with Client(server.url, server.tokens["bob"]) as c:
        err = _refusal(c, memory_mb=262_144, pids_limit=65_536, network=True)
    assert err.status == 422
    assert {cap["setting"] for cap in err.details["caps"]} == {
        "ROCKROLL_MAX_MEMORY_MB",
        "ROCKROLL_MAX_PIDS",
        "ROCKROLL_NETWORK_OWNERS",
    }


def test_defaults_are_within_the_default_caps() -> None:
    s = Settings()
    assert s.network_owners == []
    assert (s.max_memory_mb, s.max_pids, s.max_cpus, s.max_workspace_mb) == (2048, 512, 2.0, 1024)


def test_long_exec_is_422_and_allowed_ones_run(server: ServerProc) -> None:
    with Client(server.url, server.tokens["alice"]) as c:
        sb = c.create_sandbox(memory_mb=256)  # within the caps: a real sandbox
        try:
            assert sb["spec"]["memory_mb"] == 256 and sb["spec"]["network"] is False
            with pytest.raises(ApiClientError) as info:
                c.exec(sb["id"], "true", timeout_s=600)
            assert (info.value.status, info.value.code) == (422, "over_cap")
            assert "ROCKROLL_MAX_EXEC_TIMEOUT_S" in info.value.message
            assert c.exec(sb["id"], "true", timeout_s=30)["exit_code"] == 0
        finally:
            c.delete_sandbox(sb["id"])


@pytest.fixture()
def capped(data_dir: Path) -> Iterator[tuple[TestClient, dict[str, dict[str, str]]]]:
    """The app with small caps; alice may have a network, bob may not."""
    settings = make_settings(data_dir, max_memory_mb=256, max_pids=64, max_exec_timeout_s=2, network_owners=["alice"])
    with TestClient(create_app(settings)) as c:
        db = c.app.state.rr.db
        who = {n: {"Authorization": f"Bearer {create_token(db, n, admin=n == 'root')}"} for n in ("alice", "bob")}
        yield c, who
        for sb in c.app.state.rr.placement.list():
            c.app.state.rr.placement.delete(sb.id)


def test_server_caps_bind_and_omitted_values_default_below_them(capped) -> None:
    c, who = capped
    over = c.post("/v1/sandboxes", json={"memory_mb": 257}, headers=who["bob"])
    assert over.status_code == 422
    assert over.json()["error"]["code"] == "over_cap" and "ROCKROLL_MAX_MEMORY_MB" in over.json()["error"]["message"]
    assert c.post("/v1/sandboxes", json={"network": True}, headers=who["bob"]).status_code == 422

    made = c.post("/v1/sandboxes", json={}, headers=who["bob"])  # the defaults (512 MiB, 256 pids) are over the caps
    assert made.status_code == 201, made.text
    spec = made.json()["spec"]
    assert (spec["memory_mb"], spec["pids_limit"], spec["network"]) == (256, 64, False)
    sid = made.json()["id"]
    slow = c.post(f"/v1/sandboxes/{sid}/exec", json={"cmd": "true", "timeout_s": 3}, headers=who["bob"])
    assert slow.status_code == 422 and "ROCKROLL_MAX_EXEC_TIMEOUT_S" in slow.json()["error"]["message"]

    net = c.post("/v1/sandboxes", json={"network": True, "memory_mb": 128}, headers=who["alice"])
    assert net.status_code == 201, net.text  # alice is one of network_owners
    assert net.json()["spec"]["network"] is True
