"""Alert latency: seconds from a fault injected to its alert at a webhook on 127.0.0.1, per rule.

    .venv/bin/python bench/dataplane/alert_latency.py [--interval 1.0] [--json bench/results/alert_latency.json]

One control plane in this process (process sandboxes, a fresh SQLite database) with the alert rules
evaluated every ``--interval`` seconds, ``alert_for_s`` 0, and thresholds of one or two events. Faults:

* ``restart_rate``: the second SIGKILL of a session's sandbox server (threshold 2 restarts);
* ``node_lost``: a node agent registers and falls silent at once (nothing listens at its endpoint);
  the node watch must first declare it lost (2 s without heartbeat, then a failed probe);
* ``job_failures``: an eval job whose env kwargs are wrong (submitted -> failed -> alert);
* ``step_latency_p99``: 30 steps of 3 s recorded in the step-latency histogram;
* ``start_failures``: two sandbox creations whose backend start raises (threshold 2).

Each row: the rule, seconds from the fault's start to the firing alert's arrival, and to the
resolved one once the fault is gone (window 6 s, ``alert_resolve_s`` 0.5). Prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from rockroll.api.server.app import create_app
from rockroll.api.server.serve_proc import sandbox_pids, scratch_dir
from rockroll.api.server.settings import Settings
from rockroll.sandbox.errors import SandboxStartError

SECRET = "b" * 40


class Receiver:
    """A webhook on 127.0.0.1 stamping each alert with its arrival time."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.events.append(body | {"at": time.monotonic()})
                self.send_response(204)
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def arrival(self, key: str, status: str, timeout_s: float = 90.0) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for e in self.events:
                if e["key"] == key and e["status"] == status:
                    return e["at"]
            time.sleep(0.01)
        raise TimeoutError(f"no {status} {key} within {timeout_s} s")


def _until(probe: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.02)


def restart_rate(c: TestClient) -> tuple[str, float, Callable[[], None]]:
    sandbox_id = c.post("/v1/sessions", json={"env": "FrozenLake-v0"}).json()["sandbox_id"]
    manager = c.app.state.rr.placement.manager
    t0 = 0.0
    for _ in range(2):
        before = manager.get(sandbox_id).restarts
        t0 = time.monotonic()
        for pid in sandbox_pids(f"rockroll.sandbox={sandbox_id}"):
            os.kill(pid, signal.SIGKILL)
        _until(lambda b=before: manager.get(sandbox_id).restarts > b and str(manager.get(sandbox_id).state) == "ready")
    return "restart_rate:dev:FrozenLake-v0", t0, lambda: None


def node_lost(c: TestClient) -> tuple[str, float, Callable[[], None]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    node = {"endpoint": f"http://127.0.0.1:{port}", "capacity": 4, "boot": "b1"}
    auth = {"Authorization": f"Bearer {SECRET}"}
    t0 = time.monotonic()
    c.put("/v1/nodes/bench-node", json=node, headers=auth)
    stop = threading.Event()

    def rejoin() -> None:  # the fault ends: the agent heartbeats again
        def beat() -> None:
            while not stop.wait(0.3):
                c.put("/v1/nodes/bench-node", json=node | {"boot": "b2"}, headers=auth)

        threading.Thread(target=beat, daemon=True).start()

    return "node_lost:bench-node", t0, rejoin


def job_failures(c: TestClient) -> tuple[str, float, Callable[[], None]]:
    t0 = time.monotonic()
    config = {"env": "FrozenLake-v0", "kwargs": {"bogus": 1}, "episodes": 1}
    c.post("/v1/jobs", json={"kind": "eval", "config": config})
    return "job_failures:dev", t0, lambda: None


def step_latency(c: TestClient) -> tuple[str, float, Callable[[], None]]:
    t0 = time.monotonic()
    for _ in range(30):
        c.app.state.rr.metrics.observe_step(3.0)
    return "step_latency_p99", t0, lambda: None


def start_failures(c: TestClient) -> tuple[str, float, Callable[[], None]]:
    backend = c.app.state.rr.placement.manager.backend
    real = backend.start

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise SandboxStartError("injected: the backend cannot start sandboxes")

    backend.start = broken
    t0 = time.monotonic()
    for _ in range(2):
        c.post("/v1/sandboxes", json={})
    backend.start = real
    return "start_failures", t0, lambda: None


FAULTS = [restart_rate, node_lost, job_failures, step_latency, start_failures]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--interval", type=float, default=1.0, help="alert_interval_s")
    p.add_argument("--json", default="", help="write the rows here too")
    args = p.parse_args()
    receiver = Receiver()
    d = scratch_dir("alerts")
    settings = Settings(
        database_url=f"sqlite:///{d}/rockroll.db", sandbox_state_dir=str(d / "sb"), backend="process", pool_size=0,
        max_sandboxes=4, dev_mode=True, dev_hosts=["testserver"], cluster_secret=SECRET,
        alert_interval_s=args.interval, alert_for_s=0, alert_resolve_s=0.5, alert_window_s=6.0,
        alert_restarts_per_env=2, alert_job_failures=1, alert_start_failures=2, alert_webhook_url=receiver.url,
    )  # fmt: skip
    rows = []
    try:
        with TestClient(create_app(settings)) as c:
            for fault in FAULTS:
                key, t0, end_fault = fault(c)
                fired = receiver.arrival(key, "firing")
                end_fault()
                resolved = receiver.arrival(key, "resolved")
                rows.append({"rule": key.split(":")[0], "fire_s": round(fired - t0, 3),
                             "resolve_s": round(resolved - t0, 3)})  # fmt: skip
            for sb in c.app.state.rr.placement.list():
                c.app.state.rr.placement.delete(sb.id)
    finally:
        receiver.httpd.shutdown()
        shutil.rmtree(d, ignore_errors=True)
    print(f"alert latency (alert_interval_s {args.interval}, window 6 s, resolve after 0.5 s clear)")
    print(f"{'rule':<20}{'fault -> firing (s)':>22}{'fault -> resolved (s)':>24}")
    for r in rows:
        print(f"{r['rule']:<20}{r['fire_s']:>22.3f}{r['resolve_s']:>24.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"interval_s": args.interval, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
