"""A Ray cluster started here runs its workers at the driver's priority unless the environment says otherwise
(:mod:`rockroll.sandbox.ray_priority`, called by the trainer's and the control plane's local clusters)."""

from __future__ import annotations

import os

import pytest

from rockroll.sandbox.ray_priority import workers_at_driver_priority


def test_workers_run_at_the_drivers_priority_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    workers_at_driver_priority()
    assert os.environ["RAY_worker_niceness"] == "0"
    monkeypatch.setenv("RAY_worker_niceness", "5")
    workers_at_driver_priority()
    assert os.environ["RAY_worker_niceness"] == "5"
