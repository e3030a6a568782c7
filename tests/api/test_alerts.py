"""Proactive alerts (issue 36 item 2): each fault injected fires its alert, which then resolves; alerts reach a
webhook on 127.0.0.1, the log, /v1/alerts and the overview, each owner seeing their own and platform-wide ones."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from rockroll.api.alerts.rules import Finding, Observation, evaluate
from rockroll.api.server.app import create_app
from rockroll.api.server.auth import create_token
from rockroll.api.server.serve_proc import sandbox_pids
from tests.api.conftest import make_settings

SECRET = "s" * 40
RULES_FILE = Path(__file__).resolve().parents[2] / "api" / "alerts" / "prometheus-alerts.yml"


class Receiver:
    """A webhook receiver on 127.0.0.1 keeping every alert POSTed to it (``hang``: never answers)."""

    def __init__(self, hang: bool = False) -> None:
        self.events: list[dict[str, Any]] = []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if hang:
                    outer.release.wait(60)
                outer.events.append(body | {"received_at": time.time()})
                self.send_response(204)
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def wait_for(self, key: str, status: str, timeout_s: float = 30.0) -> dict[str, Any]:
        return wait(lambda: next((e for e in self.events if e["key"] == key and e["status"] == status), None),
                    timeout_s, f"the webhook never received {status} {key}: {self.events}")  # fmt: skip

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()


def wait(probe: Callable[[], Any], timeout_s: float, message: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        assert time.monotonic() < deadline, message
        time.sleep(0.05)


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _app(data_dir: Path, **overrides: Any) -> TestClient:
    fields = {"alert_interval_s": 0.1, "alert_resolve_s": 0.3, "alert_window_s": 6.0, "cluster_secret": SECRET}
    return TestClient(create_app(make_settings(data_dir, **(fields | overrides))))


@pytest.fixture()
def alerting(data_dir: Path, receiver: Receiver) -> Iterator[tuple[TestClient, dict[str, dict[str, str]]]]:
    with _app(data_dir, alert_webhook_url=receiver.url, alert_restarts_per_env=2, alert_job_failures=1) as c:
        db = c.app.state.rr.db
        who = {
            n: {"Authorization": f"Bearer {create_token(db, n, admin=n == 'root')}"} for n in ("alice", "bob", "root")
        }
        yield c, who
        for sb in c.app.state.rr.placement.list():
            c.app.state.rr.placement.delete(sb.id)


def _keys(c: TestClient, headers: dict[str, str], status: str = "firing") -> set[str]:
    return {a["key"] for a in c.get("/v1/alerts", headers=headers).json()["alerts"] if a["status"] == status}


def _kill(c: TestClient, sandbox_id: str) -> None:
    """SIGKILL the sandbox's server behind the manager's back and wait until it is replaced."""
    manager = c.app.state.rr.placement.manager
    restarts = manager.get(sandbox_id).restarts
    assert sandbox_pids(f"rockroll.sandbox={sandbox_id}"), "no server process to kill"
    for pid in sandbox_pids(f"rockroll.sandbox={sandbox_id}"):
        # a child listed with the server may die with it (bwrap's --die-with-parent) before its own turn here
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    wait(lambda: manager.get(sandbox_id).restarts > restarts and str(manager.get(sandbox_id).state) == "ready", 60,
         f"sandbox {sandbox_id} was not replaced")  # fmt: skip


@pytest.mark.slow
def test_restart_rate_fires_for_the_owner_and_resolves(alerting: Any, receiver: Receiver) -> None:
    c, who = alerting
    opened = c.post("/v1/sessions", json={"env": "FrozenLake-v0"}, headers=who["alice"]).json()
    for _ in range(2):
        _kill(c, opened["sandbox_id"])
    key = "restart_rate:alice:FrozenLake-v0"
    fired = receiver.wait_for(key, "firing")
    assert fired["owner"] == "alice" and "restarted 2 times" in fired["reason"]
    assert key in _keys(c, who["alice"]) and key in _keys(c, who["root"])
    assert key not in _keys(c, who["bob"])  # another owner's alert is none of bob's business
    banner = c.get("/v1/overview", headers=who["alice"]).json()["alerts"]
    assert [a["reason"] for a in banner if a["key"] == key] == [fired["reason"]]
    assert not [a for a in c.get("/v1/overview", headers=who["bob"]).json()["alerts"] if a["key"] == key]
    resolved = receiver.wait_for(key, "resolved", timeout_s=30)  # the restarts age out of the window
    assert resolved["id"] == fired["id"] and resolved["resolved_at"] >= fired["started_at"]
    assert key in _keys(c, who["alice"], "resolved")


def test_node_lost_fires_for_everyone_and_resolves_when_it_rejoins(alerting: Any, receiver: Receiver) -> None:
    c, who = alerting
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed: the agent is dead
    node = {"endpoint": f"http://127.0.0.1:{port}", "capacity": 4, "boot": "b1"}
    secret = {"Authorization": f"Bearer {SECRET}"}
    assert c.put("/v1/nodes/n1", json=node, headers=secret).status_code == 200
    fired = receiver.wait_for("node_lost:n1", "firing")
    assert fired["owner"] == "" and fired["severity"] == "critical"
    for name in ("alice", "bob"):  # platform-wide: every owner sees it
        assert "node_lost:n1" in _keys(c, who[name])
    beating = threading.Event()

    def heartbeat() -> None:
        while not beating.wait(0.3):
            c.put("/v1/nodes/n1", json=node | {"boot": "b2"}, headers=secret)

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        receiver.wait_for("node_lost:n1", "resolved")
    finally:
        beating.set()


@pytest.mark.slow
def test_failing_jobs_fire_for_their_owner(alerting: Any, receiver: Receiver) -> None:
    c, who = alerting
    job = c.post("/v1/jobs", json={"kind": "eval", "config": {"env": "FrozenLake-v0", "kwargs": {"bogus": 1},
                                                                "episodes": 1}}, headers=who["bob"])  # fmt: skip
    assert job.status_code in (200, 201), job.text
    fired = receiver.wait_for("job_failures:bob", "firing", timeout_s=60)
    assert fired["owner"] == "bob" and "failed" in fired["reason"]
    assert c.get(f"/v1/jobs/{job.json()['id']}", headers=who["bob"]).json()["state"] == "failed"
    assert "job_failures:bob" not in _keys(c, who["alice"])
    receiver.wait_for("job_failures:bob", "resolved", timeout_s=30)


@pytest.mark.slow
def test_slow_steps_fire_p99_and_webhook_gets_both(alerting: Any, receiver: Receiver) -> None:
    c, _who = alerting
    rr = c.app.state.rr
    for _ in range(30):
        rr.metrics.observe_step(3.0)  # 30 steps of 3 s each: the injected fault
    fired = receiver.wait_for("step_latency_p99", "firing")
    assert fired["value"] >= 2.0
    receiver.wait_for("step_latency_p99", "resolved", timeout_s=30)  # they age out of the window


def test_a_hanging_webhook_never_blocks_the_server(data_dir: Path) -> None:
    hung = Receiver(hang=True)
    try:
        with _app(data_dir, dev_mode=True, alert_webhook_url=hung.url, alert_webhook_queue=2,
                  alert_webhook_timeout_s=30, alert_webhook_retries=0) as c:  # fmt: skip
            engine = c.app.state.rr.alerts
            t0 = time.monotonic()
            for i in range(20):  # each fires at once (alert_for_s 0) and is queued for the hung receiver
                engine.apply({f"x:{i}": Finding("test", f"x:{i}", "", 1, 1, f"injected {i}")}, time.time())
            assert time.monotonic() - t0 < 1.0
            t0 = time.monotonic()
            assert c.get("/v1/health").status_code == 200 and c.get("/v1/alerts").status_code == 200
            assert time.monotonic() - t0 < 2.0
            dropped = re.search(r'rockroll_alert_notifications_dropped_total\{why="queue_full"\} (\S+)',
                                c.get("/metrics").text)  # fmt: skip
            assert dropped and float(dropped.group(1)) >= 17, "a full queue drops and counts"
    finally:
        hung.close()


def test_rules_and_hysteresis(data_dir: Path) -> None:
    with _app(data_dir, dev_mode=True, alert_interval_s=3600, alert_for_s=1.0, alert_resolve_s=2.0) as c:
        engine, s = c.app.state.rr.alerts, c.app.state.rr.settings
        o = Observation(window_s=60, sandboxes_by_state={"ready": 1, "unhealthy": 3}, start_failures=5,
                        db_growth_bytes=10**10, db_bytes=10**10, disk_free={"/x": 0.01})  # fmt: skip
        found = evaluate(o, s)
        assert {"unhealthy_share", "start_failures", "db_growth", "disk_free:/x"} <= set(found)
        f = {"k": Finding("r", "k", "", 1, 1, "why")}
        assert engine.apply(f, 100.0) == []  # pending: not yet held alert_for_s
        assert [a["status"] for a in engine.apply(f, 101.0)] == ["firing"]
        assert engine.apply({}, 101.5) == [] and engine.apply(f, 102.0) == []  # a flap does not resolve it
        assert engine.apply({}, 103.0) == [] and [a["status"] for a in engine.apply({}, 105.0)] == ["resolved"]
        assert engine.apply(f, 200.0) == [] and engine.apply({}, 200.5) == []  # gone while pending: never fired


def test_prometheus_rules_file_is_well_formed_over_exported_metrics(dev_client: TestClient) -> None:
    doc = yaml.safe_load(RULES_FILE.read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    assert doc["groups"][0]["name"] and len(rules) >= 8
    exported = {m.name for m in dev_client.app.state.rr.metrics.registry.collect()}
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", rule["alert"]) and rule["labels"]["severity"] in (
            "warning", "critical")  # fmt: skip
        assert rule["annotations"]["summary"]
        assert "for" not in rule or re.fullmatch(r"\d+[smh]", rule["for"])
        for name in re.findall(r"\brockroll_[a-z0-9_]+", rule["expr"]):
            base = re.sub(r"_(bucket|count|sum|total)$", "", name)
            assert base in exported, f"{rule['alert']}: {name} is not exported by /metrics"
