"""The priority of a local Ray cluster's workers: the driver's, not Ray's default niceness 15.

Ray starts the workers of a cluster it starts here (``ray.init()`` with no address, or ``address="local"``)
at niceness 15, where any other busy process on the machine starves them: a training step takes minutes,
a node agent's sessions answer late. The trainer's Ray workers (:mod:`rockroll.trainer.learner.ray_workers`),
the control plane's local cluster (:mod:`rockroll.api.nodes.ray`) and the test suite run them at the driver's
priority instead. Ray reads the setting when it starts the cluster: call this before ``ray.init``.
"""

from __future__ import annotations

import os

__all__ = ["workers_at_driver_priority"]


def workers_at_driver_priority() -> None:
    """Have the Ray cluster started next in this process run its workers at the driver's priority
    (``RAY_worker_niceness=0``, unless the environment sets it already)."""
    os.environ.setdefault("RAY_worker_niceness", "0")
