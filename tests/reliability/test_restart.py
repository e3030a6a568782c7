"""SIGKILL of ``rockroll serve`` (Docker backend) mid-rollout, then a restart (bench/dataplane/cp_restart.py).

The rollout's client retries and the run delivers every group; tokens, the custom env, the user
sandbox and its file, job records survive; containers are adopted or reaped; sandboxes keep no
env sessions of the killed server (they would hold session slots forever).
"""

from __future__ import annotations

import pytest

from bench.dataplane.cp_restart import render, run_restart

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_server_sigkill_mid_rollout(docker_image: str) -> None:
    res = run_restart("docker", groups=4, group_size=4, kill_after=4)
    report = render(res)
    assert res.groups_completed == res.groups_requested, report
    assert res.checks and all(res.checks.values()), report
    assert res.ok, report
