"""Issue 35's API items: deep JSON is a 4xx (no traceback), an Idempotency-Key stands for one body, a step
number out of range says the range, and each sandbox reports its own memory."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rockroll.sandbox.node.sequence import MAX_SEQ
from rockroll.sandbox.server.app import tree_rss

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_KWARGS = '{"env": "FrozenLake-v0", "kwargs": ' + '{"a": ' * 60_000 + "1" + "}" * 60_000 + "}"


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def _data_plane(c: TestClient, opened: dict[str, Any]) -> Any:
    dp = opened["data_plane"]
    return c.websocket_connect(
        f"/v1/node/sessions/{opened['id']}/ws", headers={"Authorization": f"Bearer {dp['token']}"}
    )


def test_deep_json_is_a_4xx_everywhere_without_a_traceback(
    dev_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    for path in ("/v1/sessions", "/v1/sandboxes", "/v1/jobs", "/v1/envs", "/v1/node/step"):
        for body in (DEEP, DEEP_KWARGS):
            r = dev_client.post(path, content=body, headers={"content-type": "application/json"})
            assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:200])
            assert r.json()["error"]["message"], path
    opened = dev_client.post("/v1/sessions", json={"env": "FrozenLake-v0"}).json()
    with dev_client.websocket_connect(f"/v1/sessions/{opened['id']}/ws") as ws:
        ws.send_text(DEEP)
        answer = ws.receive_json()
        assert (answer["status"], answer["error"]["code"]) == (422, "validation_error"), answer
        ws.send_text(json.dumps({"op": "reset", "seed": 0}))
        assert "observation" in ws.receive_json()  # the socket still serves
    with _data_plane(dev_client, opened) as ws:
        ws.send_text(DEEP)
        answer = ws.receive_json()
        assert (answer["status"], answer["error"]["code"]) == (422, "validation_error"), answer
    assert _tracebacks(caplog) == []


def test_a_step_number_out_of_range_says_the_range(dev_client: TestClient) -> None:
    opened = dev_client.post("/v1/sessions", json={"env": "FrozenLake-v0"}).json()
    with _data_plane(dev_client, opened) as ws:
        ws.send_text(json.dumps({"op": "reset", "seed": 0}))
        ws.receive_json()
        for seq in ("10" + "0" * 30, "1e30", "0", "-5", '"3"', str(MAX_SEQ + 1)):
            ws.send_text('{"op": "step", "seq": ' + seq + ', "action": "<answer>Left</answer>"}')
            answer = ws.receive_json()
            message = answer["error"]["message"]
            assert answer["error"]["code"] == "bad_sequence" and 400 <= answer["status"] < 500, answer
            assert f"an integer from 1 to {MAX_SEQ}" in message and "number -1 " not in message, message
            assert "the next step is number 1" in message
        ws.send_text(json.dumps({"op": "step", "seq": 1, "action": "<answer>Left</answer>"}))
        assert ws.receive_json()["seq"] == 1
    batch = {"steps": [{"token": opened["data_plane"]["token"], "op": "step", "seq": 10**30, "action": "x"}]}
    answer = dev_client.post("/v1/node/step", json=batch).json()["results"][0]
    assert f"from 1 to {MAX_SEQ}" in answer["error"]["message"]


def test_an_idempotency_key_stands_for_one_body(dev_client: TestClient) -> None:
    def open_(key: str, body: dict[str, Any]) -> Any:
        return dev_client.post("/v1/sessions", json=body, headers={"Idempotency-Key": key})

    first = open_("k-1", {"env": "FrozenLake-v0", "kwargs": {"is_slippery": False}})
    assert first.status_code == 201, first.text
    again = open_("k-1", {"kwargs": {"is_slippery": False}, "env": "FrozenLake-v0"})  # same body, keys reordered
    assert again.status_code == 201 and again.json()["id"] == first.json()["id"]
    for other in ({"env": "Sokoban-v0"}, {"env": "FrozenLake-v0", "kwargs": {"is_slippery": True}}):
        r = open_("k-1", other)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["code"] == "idempotency_key_reused"
        assert "Idempotency-Key" in r.json()["error"]["message"]
    fresh = open_("k-2", {"env": "Sokoban-v0"})
    assert fresh.status_code == 201 and fresh.json()["env"] == "Sokoban-v0"


def test_each_sandbox_reports_its_own_memory(dev_client: TestClient) -> None:
    """A process sandbox reports its process tree's RSS: a command holding 200 MB shows in its sandbox only."""
    rr = dev_client.app.state.rr
    a, b = (dev_client.post("/v1/sandboxes", json={}).json()["id"] for _ in range(2))
    manager = rr.placement.manager

    def memory(sandbox_id: str) -> int:
        sb = manager.get(sandbox_id)
        return manager.backend.health(sb.handle).memory_bytes

    before_a, before_b = memory(a), memory(b)
    assert 0 < before_a < 1 << 30 and 0 < before_b < 1 << 30
    hog = "b = bytearray(200 * 2**20); import time; time.sleep(20)"
    call = {"cmd": [sys.executable, "-c", hog], "timeout_s": 8}
    threading.Thread(target=dev_client.post, args=(f"/v1/sandboxes/{a}/exec",), kwargs={"json": call}).start()
    deadline = time.monotonic() + 20
    while memory(a) < before_a + 150 * 2**20:
        assert time.monotonic() < deadline, f"sandbox {a} never showed its command's memory"
        time.sleep(0.2)
    assert memory(b) < before_b + 50 * 2**20  # the other sandbox does not count it
    assert tree_rss(1 << 22) == 0  # no such process: nothing


def test_tree_rss_counts_children() -> None:
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(100 * 2**20); input()"], stdin=subprocess.PIPE)
    try:
        import os

        before = tree_rss(os.getpid())
        deadline = time.monotonic() + 20
        while tree_rss(child.pid) < 100 * 2**20:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert tree_rss(os.getpid()) >= before - 10 * 2**20 and tree_rss(os.getpid()) > tree_rss(child.pid)
    finally:
        child.kill()
        child.wait()
