"""Tail batching (``tail: carry``): a batch's long tail plays on into the next batch instead of being cancelled."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.faults.envs import register_fault_env
from rockroll.agentrl.faults.latency import Latency
from rockroll.agentrl.rollout.async_rollout import AsyncRollout
from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
from rockroll.agentrl.rollout.scheduler import RolloutScheduler
from rockroll.agentrl.sources.kinds import LocalSource
from rockroll.envs.config import ConfigError

SEED, MAX_SEED = 3, 10**6


def _first_seed() -> int:
    """The env seed of batch 0's first group (the scheduler draws group seeds from ``rng([seed, batch])``)."""
    return int(np.random.default_rng([SEED, 0]).integers(0, MAX_SEED))


def _scheduler(tail: str, hang_s: float, max_carry: int = 2) -> RolloutScheduler:
    env_id = f"TailLake{int(hang_s * 10)}-v0"
    register_fault_env(env_id, inner="FrozenLake-v0", mode="hang", hang_s=hang_s, fault_seeds=[_first_seed()])
    config = SchedulerConfig(
        env_ids=[env_id], num_env_groups=2, group_size=2, extra_groups=1, seed=SEED, max_env_seed=MAX_SEED,
        async_generation_ratio=1, tail=tail, max_carry_batches=max_carry,
        episode=EpisodeConfig(max_turns=4, step_timeout_s=30),
    )  # fmt: skip
    return RolloutScheduler(RandomEngine(latency=Latency("constant", 0.005), seed=0), LocalSource(), config)


def test_cancel_mode_throws_the_tail_away() -> None:
    async def run() -> None:
        s = _scheduler("cancel", hang_s=0.6)
        batch = await s.run_batch()
        assert [g[0].seed for g in batch.groups].count(_first_seed()) == 0  # the slow group lost the race
        assert batch.metrics["rollout/episodes_cancelled"] == 2
        assert await s.close(timeout_s=10)

    asyncio.run(run())


def test_carried_group_is_delivered_by_the_next_batch() -> None:
    async def run() -> None:
        s = _scheduler("carry", hang_s=0.6)
        t0 = time.monotonic()
        first = await s.run_batch()
        assert time.monotonic() - t0 < 0.6  # the batch did not wait for its tail
        assert first.metrics["rollout/groups_carried_out"] == 1
        assert first.metrics.get("rollout/episodes_cancelled", 0) == 0  # nothing started was thrown away
        assert len(first.groups) == 2 and _first_seed() not in [g[0].seed for g in first.groups]
        await asyncio.sleep(0.8)  # the carried group finishes while "the trainer updates"
        second = await s.run_batch()
        assert second.metrics["rollout/groups_carried_in"] == 1
        assert second.metrics["rollout/carried_delivered"] == 1
        seeds = [g[0].seed for g in second.groups]
        assert seeds[0] == _first_seed() and len(seeds) == 2  # carried groups come first, the batch stays full
        assert second.metrics["rollout/groups_launched"] == 2  # the carried group took a new group's place
        assert all(len(g) == 2 for g in second.groups)
        assert await s.close(timeout_s=10)
        assert s.source.open_count == 0

    asyncio.run(run())


def test_a_group_carried_too_long_is_cancelled_and_gives_its_envs_back() -> None:
    async def run() -> None:
        s = _scheduler("carry", hang_s=1.5, max_carry=1)
        await s.run_batch()
        second = await s.run_batch()  # still hanging: carried once more
        assert second.metrics["rollout/groups_carried_in"] == 1 and second.metrics["rollout/groups_carried_out"] >= 1
        third = await s.run_batch()
        assert third.metrics["rollout/groups_carry_expired"] >= 1
        assert _first_seed() not in [g[0].seed for b in (second, third) for g in b.groups]
        assert await s.close(timeout_s=10)
        assert s.source.open_count == 0

    asyncio.run(run())


def test_async_rollout_stop_cancels_the_carried_tail() -> None:
    async def run() -> None:
        s = _scheduler("carry", hang_s=1.0)
        rollout = AsyncRollout(s)
        batch = await rollout.get_batch(timeout_s=30)
        assert len(batch.groups) == 2
        await rollout.stop()
        assert not s._carry and s.source.open_count == 0

    asyncio.run(run())


def test_carry_needs_an_off_policy_ratio() -> None:
    with pytest.raises(ConfigError, match="async_generation_ratio >= 1"):
        SchedulerConfig(tail="carry", async_generation_ratio=0)


def test_a_carried_group_gets_its_carry_as_extra_staleness_allowance() -> None:
    """ratio 1, trainer at version 2: a fresh group from version 0 is stale, a group carried once is not."""
    from rockroll.agentrl.rollout.scheduler import RolloutBatch
    from rockroll.agentrl.trajectory import Trajectory

    s = _scheduler("carry", hang_s=0.1)
    rollout = AsyncRollout(s)
    rollout.trainer_version = 2

    def group(gid: str) -> list[Trajectory]:
        return [Trajectory(f"{gid}/{i}", gid, "FrozenLake-v0", 0) for i in range(2)]  # no turns: version 0

    batch = RolloutBatch([group("old"), group("carried")], carried=[0, 1])
    fresh = rollout._fresh(batch)
    assert fresh is not None and [g[0].group_id for g in fresh.groups] == ["carried"] and fresh.carried == [1]
    assert fresh.metrics["rollout/stale_groups_dropped"] == 1
