"""Episode deadlines from launch, and hedging a stalled episode on another place (first result wins)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Collection
from typing import Any

import pytest

import rockroll.envhub as envhub
from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.faults.envs import FaultyEnv
from rockroll.agentrl.faults.latency import Latency
from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
from rockroll.agentrl.rollout.scheduler import RolloutScheduler
from rockroll.agentrl.sources.kinds import EnvSource


class PlacedSource(EnvSource):
    """Envs on named places: the first env opened lands on ``slow`` (every step there sleeps ``stall_s``)."""

    def __init__(self, stall_s: float) -> None:
        super().__init__()
        self.stall_s = stall_s
        self.places: dict[int, str] = {}
        self.avoided: list[tuple[str, ...]] = []
        self.opens = itertools.count()

    def _make(self, place: str) -> Any:
        if place == "slow":
            env = FaultyEnv(inner="FrozenLake-v0", step_latency={"kind": "constant", "median_s": self.stall_s})
        else:
            env = envhub.make("FrozenLake-v0")
        self.places[id(env)] = place
        return env

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        n = next(self.opens)
        return self._make("slow" if n == 0 else f"fast{n}")

    def _open_avoiding(self, env_id: str, kwargs: dict[str, Any], avoid: Collection[str]) -> Any:
        self.avoided.append(tuple(avoid))
        place = f"fast{next(self.opens)}"
        assert place not in avoid
        return self._make(place)

    def location(self, env: Any) -> str | None:
        return self.places.get(id(env))


def _config(**over: Any) -> SchedulerConfig:
    base: dict[str, Any] = {
        "env_ids": ["FrozenLake-v0"], "num_env_groups": 2, "group_size": 4, "seed": 1,
        "episode": EpisodeConfig(max_turns=6, step_timeout_s=30),
    }  # fmt: skip
    return SchedulerConfig(**(base | over))


def test_a_stalled_episode_is_hedged_elsewhere_and_the_copy_wins() -> None:
    async def run() -> None:
        source = PlacedSource(stall_s=3.0)
        cfg = _config(hedge_quantile=0.9, hedge_min_s=0.3, hedge_min_samples=5, hedge_max_share=0.5)
        s = RolloutScheduler(RandomEngine(latency=Latency("constant", 0.01), seed=0), source, cfg)
        t0 = time.monotonic()
        batch = await s.run_batch()
        took = time.monotonic() - t0
        m = batch.metrics
        assert m["rollout/hedges"] == 1 and m["rollout/hedge_wins"] == 1, m
        assert source.avoided == [("slow",)]  # the copy was placed away from the stall
        assert took < 2.5  # did not wait for the stalled step (3 s)
        assert len(batch.groups) == 2 and not batch.masked
        ids = [t.episode_id for t in batch.trajectories]
        assert len(ids) == len(set(ids)) == 8  # the winner alone is delivered
        assert await s.close(timeout_s=10)
        assert source.open_count == 0

    asyncio.run(run())


@pytest.mark.slow
def test_without_hedging_the_batch_waits_for_the_stall() -> None:
    async def run() -> None:
        source = PlacedSource(stall_s=1.5)
        s = RolloutScheduler(RandomEngine(latency=Latency("constant", 0.01), seed=0), source, _config())
        t0 = time.monotonic()
        batch = await s.run_batch()
        assert time.monotonic() - t0 >= 1.5 and "rollout/hedges" not in batch.metrics
        assert await s.close(timeout_s=10)

    asyncio.run(run())


def test_the_episode_deadline_counts_time_queued_for_a_slot() -> None:
    """One slot, episodes of ~0.25 s, a 1 s deadline: those queued behind the first few run out of time."""

    def play(max_concurrent: int | None) -> Any:
        from rockroll.agentrl.sources.kinds import LocalSource

        episode = EpisodeConfig(max_turns=5, episode_timeout_s=1.0, max_retries=0)
        cfg = _config(num_env_groups=2, group_size=4, max_concurrent_episodes=max_concurrent, episode=episode)
        engine = RandomEngine(latency=Latency("constant", 0.05), seed=0, invalid_prob=1.0)  # no early finish

        async def run() -> Any:
            s = RolloutScheduler(engine, LocalSource(), cfg)
            try:
                return await s.run_batch()
            finally:
                await s.close(timeout_s=10)

        return asyncio.run(run())

    queued = play(1)
    assert queued.metrics["rollout/episodes_masked"] > 0
    assert all(t.failure is not None and t.failure.kind == "infra" for t in queued.masked)
    at_once = play(None)
    assert at_once.metrics["rollout/episodes_masked"] == 0 and len(at_once.groups) == 2
