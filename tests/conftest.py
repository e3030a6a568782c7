"""Settings of the whole suite (its plugin: :mod:`tests.suite_plugin`)."""

from __future__ import annotations

import os

from rockroll.sandbox.ray_priority import workers_at_driver_priority

pytest_plugins = ["tests.suite_plugin"]

# Ray starts a local cluster's workers at niceness 15, where other busy processes on the machine starve them
# (the suite must pass beside other work: scripts/test.sh); the clusters the tests start run them as the
# product's do, at the driver's priority (trainer/learner/ray_workers.py, api/nodes/ray.py)
workers_at_driver_priority()
if os.environ.get("PYTEST_XDIST_WORKER"):
    # parallel workers share the cores: one BLAS/OpenMP thread each instead of one per core per worker
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
