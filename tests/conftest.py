"""Settings of the whole suite."""

from __future__ import annotations

import os

# Ray starts a local cluster's workers at niceness 15, where other busy processes on the machine starve them
# (the suite must pass beside other work: scripts/test.sh); the clusters the tests start run them as the
# product's do, at the driver's priority (trainer/learner/ray_workers.py, api/nodes/ray.py)
os.environ.setdefault("RAY_worker_niceness", "0")
