"""Regression tests for what the chaos and restart runs (bench/sandboxes/chaos.py, bench/dataplane/cp_restart.py) found.

* A sandbox whose server died between two probes looked like the least-loaded one (its sessions
  were given back) and took every new session until the monitor noticed: hundreds of episodes
  were masked. Now an open that finds the server unreachable marks the sandbox unhealthy and
  places the session elsewhere.
* Env opens that wait for a free session slot (backpressure) could take every thread of the env
  manager's pool, so the steps and closes that free slots never ran: the rollout hung. Opens now
  have a pool of their own.
* A health probe answered by the old server but landing after a restart copied its session count
  onto the new incarnation (found by bench/dataplane/cp_restart.py): phantom sessions held slots for ever.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
from rockroll.agentrl.sources.kinds import LocalSource
from rockroll.sandbox.manager import SandboxManager


def test_open_skips_a_sandbox_that_died_since_its_last_probe(make_manager: Callable[..., SandboxManager]) -> None:
    m = make_manager("process", monitor_interval_s=None)  # no probes: only callers can notice
    dead, live = m.create(), m.create()
    os.killpg(int(dead.handle.ref), signal.SIGKILL)
    live.touch()  # the dead one is now the least recently used: the first pick
    with m.open_session("FrozenLake-v0") as s:
        assert s.sandbox_id == live.id
        assert s.reset(seed=0)[0]
    assert dead.state == "unhealthy" and live.state == "ready"


class OneSlotSource(LocalSource):
    """Local envs, at most one open at a time; an open waits for the slot (like a full pool)."""

    def __init__(self) -> None:
        super().__init__()
        self.slot = threading.Semaphore(1)

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        if not self.slot.acquire(timeout=10):
            raise TimeoutError("no slot within 10 s")
        return super()._open(env_id, kwargs)

    def close(self, env: Any) -> None:
        super().close(env)
        self.slot.release()


def test_waiting_opens_do_not_starve_steps_and_closes() -> None:
    source = OneSlotSource()
    cfg = EpisodeConfig(max_turns=3, max_tokens_per_turn=16, step_timeout_s=5, start_timeout_s=30)
    manager = EnvManager(RandomEngine(seed=0), source, cfg, threads=2)

    async def go() -> list[Any]:
        specs = [EpisodeSpec("FrozenLake-v0", i, episode_id=f"g0/{i}") for i in range(4)]
        out = await asyncio.wait_for(asyncio.gather(*(manager.run(s) for s in specs)), 60)
        assert await manager.drain(10)
        return out

    trajs = asyncio.run(go())
    manager.shutdown()
    assert [t.failure for t in trajs] == [None] * 4
    assert [t.infra_retries for t in trajs] == [0] * 4 and not manager.failures  # no open timed out
    assert source.open_count == 0


def test_a_probe_of_a_replaced_generation_changes_nothing(make_manager: Callable[..., SandboxManager]) -> None:
    """Found by bench/dataplane/cp_restart.py: a probe answered by the old server, landing after a restart,
    copied the old server's session count onto the new one (phantom sessions holding slots)."""
    m = make_manager("process", monitor_interval_s=None)
    sb = m.create()
    s1, s2 = sb.open_session("FrozenLake-v0"), sb.open_session("FrozenLake-v0")
    health = m.backend.health

    def health_then_restart(handle: Any, timeout_s: float = 2.0) -> Any:
        answer = health(handle, timeout_s=timeout_s)  # the old server: 2 sessions
        m._invalidate(sb, force=True)  # a restart starts meanwhile (sessions back to 0)
        return answer

    m.backend.health = health_then_restart  # type: ignore[method-assign]
    try:
        assert m.monitor.probe(sb)
    finally:
        m.backend.health = health  # type: ignore[method-assign]
    assert sb.sessions == 0 and sb.state == "restarting"
    m._replace(sb, "test")
    assert sb.state == "ready" and sb.sessions == 0
    for s in (s1, s2):
        s.close()
