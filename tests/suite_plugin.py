"""The suite's own pytest plugin: tests that need the machine to themselves, and the time report.

Parallel workers (pytest-xdist, ``-n``; scripts/test.sh) share the machine. A test marked
``exclusive`` (a measurement, or a bar that depends on the machine's speed) runs alone: every worker
holds a shared lock around each of its tests, an exclusive test takes it exclusively. A gate lock in
front of it keeps a waiting exclusive test from being starved by the others' stream of shared locks.
Without workers nothing is locked. The longest files are handed out first (their seconds in
``tests/file_seconds.json``, written by ``bench/harness/suite_time.py --write-hints``; then any file with a
``slow`` test), so they do not start last and leave the other workers idle at the end.

After the run the controller prints the suite's wall time against its budget
(``ROCKROLL_SUITE_BUDGET_S``, 1200 s: the idle 2-core budget), the ten slowest tests, and the tests
over ``ROCKROLL_SLOW_S`` that do not carry ``slow``. Over budget is a warning, not a failure: a loaded
machine is slower. With ``ROCKROLL_SUITE_JSON=PATH`` it also writes those figures (and every test's
seconds) to PATH, for ``bench/harness/suite_time.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BUDGET_S = float(os.environ.get("ROCKROLL_SUITE_BUDGET_S", "1200"))
#: the marking rule: over 5 s on the idle machine is ``slow``. Three workers on two cores run each test 2-3x
#: slower (1,561 tests: 3,897 s summed against 1,967 s alone), so a parallel run reports those over 15 s
SLOW_S = 5.0
PARALLEL_SLOWDOWN = 3.0
SHOWN = 10
#: test file -> its seconds in a measured run: the order in which files are handed to workers
HINTS = Path(__file__).resolve().parent / "file_seconds.json"


def _lock_dir() -> Path:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "solo")
    d = Path(tempfile.gettempdir()) / f"rockroll-suite-{run}"
    d.mkdir(exist_ok=True)
    return d


@contextlib.contextmanager
def machine_share(exclusive: bool) -> Iterator[None]:
    """Hold this worker's share of the machine: shared for most tests, the whole machine for ``exclusive``."""
    d = _lock_dir()
    with open(d / "gate", "a+") as gate, open(d / "share", "a+") as share:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(share, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(share, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    with machine_share(item.get_closest_marker("exclusive") is not None):
        yield


class SuiteClock:
    """Per-test seconds (setup + call + teardown) and the run's wall time, seen by the controller."""

    def __init__(self, slow_s: float) -> None:
        self.slow_s = slow_s
        self.started = time.monotonic()
        self.seconds: Counter[str] = Counter()
        self.slow: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration
        if "slow" in report.keywords:
            self.slow.add(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.seconds:
            return
        wall = time.monotonic() - self.started
        tr = terminalreporter
        tr.section("suite time")
        share = 100 * wall / BUDGET_S
        tr.write_line(
            f"wall {wall:.0f} s of a {BUDGET_S:.0f} s budget ({share:.0f}%); tests summed {sum(self.seconds.values()):.0f} s"
        )
        if wall > BUDGET_S:
            tr.write_line(
                f"WARNING: the suite ran {wall - BUDGET_S:.0f} s over its budget (a loaded machine is slower)"
            )
        tr.write_line("ten slowest tests (setup + call + teardown):")
        for nodeid, s in self.seconds.most_common(SHOWN):
            tr.write_line(f"  {s:7.1f} s  {nodeid}")
        unmarked = [(n, s) for n, s in self.seconds.most_common() if s > self.slow_s and n not in self.slow]
        self._write_json(wall, unmarked)
        if unmarked:
            tr.write_line(f"WARNING: {len(unmarked)} tests over {self.slow_s:.0f} s without @pytest.mark.slow:")
            for nodeid, s in unmarked[:SHOWN]:
                tr.write_line(f"  {s:7.1f} s  {nodeid}")

    def _write_json(self, wall: float, unmarked: list[tuple[str, float]]) -> None:
        path = os.environ.get("ROCKROLL_SUITE_JSON")
        if not path:
            return
        record = {
            "wall_s": round(wall, 1),
            "budget_s": BUDGET_S,
            "tests": len(self.seconds),
            "summed_s": round(sum(self.seconds.values()), 1),
            "slowest": [[n, round(s, 1)] for n, s in self.seconds.most_common(SHOWN)],
            "unmarked_over_slow_s": [[n, round(s, 1)] for n, s in unmarked],
            "seconds": {n: round(s, 2) for n, s in sorted(self.seconds.items())},
        }
        Path(path).write_text(json.dumps(record, indent=1) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without workers) keeps the clock
        parallel = bool(getattr(config.option, "numprocesses", None))
        default = SLOW_S * (PARALLEL_SLOWDOWN if parallel else 1.0)
        slow_s = float(os.environ.get("ROCKROLL_SLOW_S", default))
        config.pluginmanager.register(SuiteClock(slow_s), "rockroll-suite-clock")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with a ``slow`` test first (a stable sort: the same order on every worker, as xdist needs)."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    hints = json.loads(HINTS.read_text()) if HINTS.exists() else {}
    root = config.rootpath

    def key(item: pytest.Item) -> tuple[bool, float]:
        seconds = hints.get(item.path.relative_to(root).as_posix(), 0.0) if item.path.is_relative_to(root) else 0.0
        return item.path not in slow_files and not seconds, -seconds

    items.sort(key=key)
