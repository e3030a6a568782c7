"""``bench/harness/cpu_load.py``: the load generator beside the suite stops by itself and refuses unbounded runs."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_load_stops_by_itself() -> None:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "bench/harness/cpu_load.py", "--procs", "2", "--seconds", "1"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0 and "2 busy processes for 1 s" in out.stdout, out.stdout + out.stderr
    assert time.monotonic() - t0 < 60


def test_an_unbounded_load_is_refused() -> None:
    for bad in (["--seconds", "0"], ["--seconds", "999999"], ["--procs", "0"]):
        out = subprocess.run([sys.executable, "bench/harness/cpu_load.py", *bad], cwd=ROOT, capture_output=True,
                             text=True, timeout=60)  # fmt: skip
        assert out.returncode == 2 and "must be" in out.stderr, (bad, out.stderr)
