"""The suite's plugin (tests/suite_plugin.py): exclusive tests run alone, and the time report after the run."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.suite_plugin import _lock_dir, machine_share

ROOT = Path(__file__).resolve().parent.parent


def _until(cond, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return False


def _gate_held() -> bool:
    with open(_lock_dir() / "gate", "a+") as gate:
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(gate, fcntl.LOCK_UN)
        return False


def test_an_exclusive_test_waits_for_shared_ones_and_holds_off_later_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", uuid.uuid4().hex)
    events: list[str] = []
    release_a, release_b = threading.Event(), threading.Event()

    def hold(name: str, exclusive: bool, release: threading.Event | None) -> None:
        with machine_share(exclusive):
            events.append(f"{name} in")
            if release is not None:
                release.wait(10)
            events.append(f"{name} out")

    a = threading.Thread(target=hold, args=("a", False, release_a))
    a.start()
    assert _until(lambda: "a in" in events)
    b = threading.Thread(target=hold, args=("b", True, release_b))  # exclusive: waits for a
    b.start()
    assert _until(_gate_held)  # b queued at the gate (a releases it once it holds its share)
    c = threading.Thread(target=hold, args=("c", False, None))  # shared, but after b asked: waits for b
    c.start()
    assert not _until(lambda: "b in" in events or "c in" in events, 0.5)
    release_a.set()
    assert _until(lambda: "b in" in events)
    assert "c in" not in events  # b holds the whole machine
    release_b.set()
    for t in (a, b, c):
        t.join(10)
    assert events == ["a in", "a out", "b in", "b out", "c in", "c out"]


def test_the_report_prints_the_budget_and_the_slowest_and_writes_json(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(
        "import time, pytest\ndef test_quick():\n    pass\ndef test_slower():\n    time.sleep(0.3)\n"
    )
    out = tmp_path / "suite.json"
    env = os.environ | {"ROCKROLL_SUITE_JSON": str(out), "ROCKROLL_SUITE_BUDGET_S": "0.01", "ROCKROLL_SLOW_S": "0.2"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.suite_plugin", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "of a 0 s budget" in proc.stdout and "over its budget" in proc.stdout, proc.stdout
    assert "1 tests over 0 s without @pytest.mark.slow" in proc.stdout, proc.stdout
    record = json.loads(out.read_text())
    assert record["tests"] == 2 and record["slowest"][0][0].endswith("test_slower")
    assert record["slowest"][0][1] >= 0.3 and [n for n, _ in record["unmarked_over_slow_s"]] == [
        record["slowest"][0][0]
    ]
