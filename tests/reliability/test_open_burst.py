"""A burst of ``open_session`` calls on a cold manager at its sandbox limit: all succeed.

Found by bench/dataplane/load.py: N sessions opened at once through the API while the first sandbox was
still starting got ``429 capacity`` for all but one, although that sandbox had room for every
session. The manager now waits for a sandbox that is coming up instead of failing.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.manager import SandboxManager


def test_burst_of_opens_waits_for_the_starting_sandbox(make_manager: Callable[..., SandboxManager]) -> None:
    m = make_manager("process", max_sandboxes=1, default_spec=SandboxSpec(max_sessions=8))
    with ThreadPoolExecutor(max_workers=8) as pool:
        sessions = list(pool.map(lambda _i: m.open_session("FrozenLake-v0"), range(8)))
    try:
        assert len({s.sandbox_id for s in sessions}) == 1
        assert all(s.reset(seed=i)[0] for i, s in enumerate(sessions))
    finally:
        for s in sessions:
            s.close()
