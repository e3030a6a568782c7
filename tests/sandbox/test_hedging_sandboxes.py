"""Hedging through real process sandboxes: a frozen sandbox's episodes are copied onto the other one."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.faults.latency import Latency
from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
from rockroll.agentrl.rollout.scheduler import RolloutScheduler
from rockroll.sandbox.base import SandboxSpec
from tests.sandbox.counting import counting_source


def test_episodes_on_a_frozen_sandbox_are_hedged_on_another(make_manager: Any) -> None:
    m = make_manager(
        max_sandboxes=2, monitor_interval_s=None, default_spec=SandboxSpec(max_sessions=16), failure_threshold=100
    )
    a, b = m.create(), m.create()

    CountingSource = counting_source()
    source = CountingSource(m, reuse_sessions=False)
    cfg = SchedulerConfig(
        env_ids=["FrozenLake-v0"], num_env_groups=2, group_size=4, seed=2,
        hedge_quantile=0.9, hedge_min_s=0.5, hedge_min_samples=8, hedge_max_share=1.0,
        episode=EpisodeConfig(max_turns=8, step_timeout_s=60),
    )  # fmt: skip
    engine = RandomEngine(latency=Latency("constant", 0.05), seed=0, invalid_prob=1.0)  # plays every turn
    frozen: list[str] = []

    async def run() -> Any:
        s = RolloutScheduler(engine, source, cfg)

        async def freeze_a() -> None:  # once the env's call times are known, sandbox a stops answering
            deadline = time.monotonic() + 60  # a loaded machine starts sandboxes and plays turns slowly
            while time.monotonic() < deadline:
                # every episode's env is open: a stalled env call is hedged, a stalled open is not (it waits
                # out rollout.episode.start_timeout_s and is retried), which is not what this test is about
                if CountingSource.opened >= 8 and len(s.manager.watch.durations.get("FrozenLake-v0", ())) >= 8:
                    os.killpg(int(a.handle.ref), signal.SIGSTOP)
                    frozen.append(a.id)
                    return
                await asyncio.sleep(0.01)

        freezer = asyncio.create_task(freeze_a())
        try:
            batch = await asyncio.wait_for(s.run_batch(), 240)  # a bound, not a speed check: loaded runners are slow
        finally:
            await freezer
            if frozen:
                os.killpg(int(a.handle.ref), signal.SIGCONT)
            await s.close(timeout_s=30)
        return batch

    batch = asyncio.run(run())
    m_ = batch.metrics
    assert frozen == [a.id]
    assert m_["rollout/hedges"] >= 1 and m_["rollout/hedge_wins"] >= 1, m_
    assert len(batch.groups) == 2 and not batch.masked  # no episode lost, none scored as the agent's failure
    assert len({t.episode_id for t in batch.trajectories}) == 8
    assert source.open_count == 0 and b.state == "ready"
