"""The trainer's local Ray cluster runs its workers at the driver's priority, not Ray's niceness 15 (where any
other busy process on the machine starves the update and generation)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import os
from rockroll.trainer.learner.ray_workers import _init_ray
ray = _init_ray()

@ray.remote(num_cpus=0)
def niceness():
    return os.nice(0)

print("niceness", ray.get(niceness.remote()), os.nice(0))
ray.shutdown()
"""


@pytest.mark.slow
def test_local_ray_workers_run_at_the_drivers_priority() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_worker_niceness", "RAY_ADDRESS")}
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    worker, driver = (int(v) for v in out.stdout.split("niceness", 1)[1].split()[:2])
    assert worker == driver == 0, out.stdout
