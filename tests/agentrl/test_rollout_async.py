"""Asynchronous rollout: bounded lag (async_generation_ratio), stale-sample dropping, suspend/resume."""

from __future__ import annotations

import asyncio

from rockroll.agentrl.async_rollout import AsyncRollout
from rockroll.agentrl.config import EpisodeConfig, SchedulerConfig
from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.env_source import LocalSource
from rockroll.agentrl.latency import Latency
from rockroll.agentrl.scheduler import RolloutScheduler


def _scheduler(ratio: int) -> RolloutScheduler:
    engine = RandomEngine(latency=Latency("constant", 0.01), seed=0)
    config = SchedulerConfig(
        env_ids=["FrozenLake-v0"],
        num_env_groups=2,
        group_size=2,
        async_generation_ratio=ratio,
        episode=EpisodeConfig(max_turns=6),
    )
    return RolloutScheduler(engine, LocalSource(), config)


def test_rollout_runs_ahead_by_at_most_the_ratio() -> None:
    async def run() -> None:
        scheduler = _scheduler(ratio=1)
        rollout = AsyncRollout(scheduler)
        first = await rollout.get_batch(timeout_s=30)
        assert len(first.groups) == 2 and first.oldest_weight_version == 0
        await asyncio.sleep(0.5)  # the producer fills the buffer, then waits
        assert len(rollout.buffer) + rollout._in_production <= 2
        assert scheduler.batches <= 3
        for version in (1, 2, 3):
            await rollout.update_weights({}, version)
            batch = await rollout.get_batch(timeout_s=30)
            assert batch.oldest_weight_version >= version - 1  # never more than `ratio` versions behind
        await rollout.stop()
        assert scheduler.source.open_count == 0

    asyncio.run(run())


def test_on_policy_generates_nothing_ahead() -> None:
    async def run() -> None:
        scheduler = _scheduler(ratio=0)
        rollout = AsyncRollout(scheduler)
        await rollout.get_batch(timeout_s=30)
        await asyncio.sleep(0.2)  # training: no batch starts before the trainer asks for it
        assert scheduler.batches == 1 and scheduler.engine.requests > 0
        await rollout.update_weights({}, 1)
        batch = await rollout.get_batch(timeout_s=30)
        assert all(v == 1 for t in batch.trajectories for v in t.weight_versions)
        assert rollout.stale_groups_dropped == 0 and scheduler.batches == 2  # none thrown away
        await rollout.stop()

    asyncio.run(run())


def test_groups_older_than_the_ratio_are_dropped() -> None:
    async def run() -> None:
        scheduler = _scheduler(ratio=1)
        rollout = AsyncRollout(scheduler)
        await rollout.get_batch(timeout_s=30)
        await asyncio.sleep(0.5)  # the next batch is made ahead with version-0 weights
        await rollout.update_weights({}, 2)  # two versions on: that batch is too old
        batch = await rollout.get_batch(timeout_s=30)
        assert rollout.stale_groups_dropped > 0
        assert batch.oldest_weight_version >= 1
        await rollout.stop()

    asyncio.run(run())


def test_suspend_stops_generation_until_resume() -> None:
    async def run() -> None:
        scheduler = _scheduler(ratio=0)
        task = asyncio.create_task(scheduler.run_batch())
        await asyncio.sleep(0.05)
        await scheduler.gate.suspend()
        assert scheduler.gate.in_flight == 0
        before = scheduler.engine.requests
        await asyncio.sleep(0.2)
        assert scheduler.engine.requests == before and not task.done()
        scheduler.gate.resume()
        batch = await asyncio.wait_for(task, 30)
        assert len(batch.groups) == 2
        assert await scheduler.close()

    asyncio.run(run())


def test_batch_layout_follows_the_history_mode() -> None:
    for history, layout in (("full", "concat"), ("last_k", "per_turn")):
        config = SchedulerConfig(num_env_groups=1, group_size=2, episode=EpisodeConfig(max_turns=5, history=history))
        batch = asyncio.run(RolloutScheduler(RandomEngine(), LocalSource(), config).run_batch())
        assert batch.layout == layout
        rows = batch.samples()
        expected = 2 if layout == "concat" else sum(len(t.turns) for t in batch.trajectories)
        assert len(rows) == expected and all(r.group_id == batch.groups[0][0].group_id for r in rows)
