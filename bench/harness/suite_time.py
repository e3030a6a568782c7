"""The test suite's wall time against its budget, idle or beside a bounded load, with its ten slowest tests.

    .venv/bin/python bench/harness/suite_time.py --label idle
    .venv/bin/python bench/harness/suite_time.py --label loaded --load 2      # beside 2 busy processes
    .venv/bin/python bench/harness/suite_time.py --label fast -- -m "not slow"

Runs pytest as ``scripts/test.sh`` does (parallel workers, ``--dist loadfile``; the services the suite
needs must be set up already: run ``bash scripts/test.sh`` once first, and export ``ROCKROLL_TEST_PG_URL`` and
``ROCKROLL_REQUIRE_DOCKER=1`` as it does). The suite's plugin (tests/suite_plugin.py) writes the figures;
this script adds the machine's load and cores and saves them to ``bench/results/suite_time_<label>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"

__all__ = ["main", "run_suite", "write_hints"]


def run_suite(pytest_args: list[str], workers: int, load: int, max_s: float) -> dict:
    """One pytest run of the suite (beside ``load`` busy processes); the plugin's record plus the run's context."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "suite.json"
        env = os.environ | {"ROCKROLL_SUITE_JSON": str(out)}
        spinner = None
        if load:
            cpu_load = ROOT / "bench" / "harness" / "cpu_load.py"
            spinner = subprocess.Popen([sys.executable, str(cpu_load), "--procs", str(load), "--seconds", str(max_s)])
        started = time.monotonic()
        try:
            cmd = [sys.executable, "-m", "pytest", "-n", str(workers), "--dist", "loadfile", *pytest_args]
            rc = subprocess.run(cmd, cwd=ROOT, env=env, timeout=max_s).returncode
        finally:
            if spinner is not None:
                spinner.terminate()
                spinner.wait(30)
        record = json.loads(out.read_text()) if out.exists() else {}
    record.update(
        pytest_rc=rc,
        pytest_args=pytest_args,
        workers=workers,
        load_procs=load,
        cores=os.cpu_count(),
        outer_wall_s=round(time.monotonic() - started, 1),
        loadavg_end=os.getloadavg(),
    )
    return record


def write_hints(seconds: dict[str, float], floor_s: float = 5.0) -> None:
    """Per-file seconds (files over ``floor_s``) for the order in which the suite hands files to workers."""
    files: dict[str, float] = {}
    for nodeid, s in seconds.items():
        f = nodeid.split("::")[0]
        files[f] = files.get(f, 0.0) + s
    hints = {f: round(s, 1) for f, s in sorted(files.items()) if s >= floor_s}
    (ROOT / "tests" / "file_seconds.json").write_text(json.dumps(hints, indent=1) + "\n")
    print(f"wrote tests/file_seconds.json ({len(hints)} files)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--label", required=True, help="names the result file bench/results/suite_time_<label>.json")
    p.add_argument("--workers", type=int, default=3, help="pytest-xdist workers (scripts/test.sh: 3)")
    p.add_argument("--load", type=int, default=0, help="busy processes beside the suite (bench/harness/cpu_load.py)")
    p.add_argument("--max-s", type=float, default=5400.0, help="stop the suite (and the load) after this long")
    p.add_argument("--write-hints", action="store_true", help="rewrite tests/file_seconds.json from this run")
    p.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest")
    a = p.parse_args(argv)
    record = run_suite(a.pytest_args, a.workers, a.load, a.max_s)
    path = RESULTS / f"suite_time_{a.label}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print("| label | workers | load | tests | wall s | budget s | pytest rc |\n|---|---|---|---|---|---|---|")
    print(
        f"| {a.label} | {a.workers} | {a.load} | {record.get('tests')} | {record.get('wall_s')} "
        f"| {record.get('budget_s')} | {record['pytest_rc']} |"
    )
    for nodeid, s in record.get("slowest", []):
        print(f"  {s:7.1f} s  {nodeid}")
    print(f"wrote {path.relative_to(ROOT)}")
    if a.write_hints and record.get("seconds"):
        write_hints(record["seconds"])
    return 0 if record["pytest_rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
