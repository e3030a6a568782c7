"""The reward stage: rewards run off the event loop in a pool of their own, async rewards are awaited,
failures and timeouts are infra failures of stage ``reward`` (masked, never retried), and the time
spent is counted (``busy["reward"]``, ``time/reward_share``). Both env managers (per-episode and
lock-step) score through the same pool."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.rewards.pool import RewardPool, reward_metrics
from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
from rockroll.agentrl.rollout.lockstep import LockstepEnvManager
from rockroll.agentrl.rollout.scheduler import RolloutScheduler
from rockroll.agentrl.sources.kinds import LocalSource
from rockroll.agentrl.trajectory import Trajectory

CFG = EpisodeConfig(max_turns=3, max_tokens_per_turn=32, reward_workers=8)
N = 8


@pytest.fixture(params=["episode", "lockstep"])
def manager_cls(request: pytest.FixtureRequest) -> type[EnvManager]:
    return LockstepEnvManager if request.param == "lockstep" else EnvManager


def _play(
    cls: type[EnvManager], reward_fn: Callable[[Trajectory], Any] | None, config: EpisodeConfig = CFG
) -> tuple[list[Trajectory], EnvManager, float, float]:
    """Play N FrozenLake episodes at once; (trajectories, manager, wall seconds, longest event-loop stall)."""
    source = LocalSource()
    manager = cls(RandomEngine(seed=0), source, config, reward_fn=reward_fn)

    async def go() -> tuple[list[Trajectory], float, float]:
        stop = asyncio.Event()
        gaps: list[float] = []

        async def ticker() -> None:  # a 10 ms heartbeat: a reward on the loop would stall it
            loop = asyncio.get_running_loop()
            while not stop.is_set():
                t = loop.time()
                await asyncio.sleep(0.01)
                gaps.append(loop.time() - t)

        tick = asyncio.create_task(ticker())
        t0 = time.monotonic()
        specs = [EpisodeSpec("FrozenLake-v0", seed=i, episode_id=f"g0/{i}") for i in range(N)]
        trajs = await asyncio.gather(*(manager.run(s) for s in specs))
        wall = time.monotonic() - t0
        stop.set()
        await tick
        assert await manager.drain(10)
        return list(trajs), wall, max(gaps)

    try:
        trajs, wall, stall = asyncio.run(go())
    finally:
        manager.shutdown()
    assert source.open_count == 0
    return trajs, manager, wall, stall


def test_slow_rewards_overlap_and_never_block_the_loop(manager_cls: type[EnvManager]) -> None:
    threads: set[int] = set()

    def slow(traj: Trajectory) -> float:
        threads.add(threading.get_ident())
        time.sleep(0.5)
        return 1.0 + traj.seed

    trajs, manager, wall, stall = _play(manager_cls, slow)
    assert [t.final_reward for t in trajs] == [1.0 + i for i in range(N)]
    assert not any(t.masked for t in trajs)
    assert wall < 2.5, f"{N} rewards of 0.5 s took {wall:.2f}s: they did not overlap"
    assert stall < 0.25, f"the event loop stalled {stall:.2f}s: a reward ran on it"
    assert threading.main_thread().ident not in threads and 2 <= len(threads) <= CFG.reward_workers
    assert manager.reward_pool.threads == len(threads)
    counts = manager.reward_counts()
    assert counts["calls"] == N and counts["busy_s"] >= N * 0.45
    if manager_cls is LockstepEnvManager:  # wall time with a reward in flight, like its rounds
        assert 0.45 <= manager.busy["reward"] < N * 0.45
    else:  # each episode's wait, summed like generation and env
        assert manager.busy["reward"] >= N * 0.45


def test_async_rewards_are_awaited_on_the_loop(manager_cls: type[EnvManager]) -> None:
    async def judge(traj: Trajectory) -> float:
        await asyncio.sleep(0.3)
        return 0.5

    trajs, manager, wall, stall = _play(manager_cls, judge)
    assert [t.final_reward for t in trajs] == [0.5] * N
    assert wall < 2.0 and stall < 0.25
    assert manager.reward_pool.threads == 0  # no thread held while a judge waits
    assert manager.reward_counts()["calls"] == N


def test_a_raising_reward_masks_the_episode_without_retry(manager_cls: type[EnvManager]) -> None:
    calls: list[int] = []

    def broken(traj: Trajectory) -> float:
        calls.append(traj.seed)
        raise KeyError("no such judge")

    trajs, manager, *_ = _play(manager_cls, broken, CFG.model_copy(update={"max_retries": 2}))
    for t in trajs:
        assert t.masked and t.failure is not None and t.failure.stage == "reward" and t.failure.kind == "infra"
        assert t.failure.error == "KeyError" and t.infra_retries == 0
    assert sorted(calls) == list(range(N))  # scored once each: never retried
    assert manager.failures["reward"] == N and manager.reward_counts()["errors"] == N


@pytest.mark.parametrize("kind", ["thread", "async"])
def test_a_reward_past_its_timeout_is_an_infra_failure(manager_cls: type[EnvManager], kind: str) -> None:
    def slow(traj: Trajectory) -> float:
        time.sleep(1.0)
        return 1.0

    async def slow_judge(traj: Trajectory) -> float:
        await asyncio.sleep(30)
        return 1.0

    config = CFG.model_copy(update={"reward_timeout_s": 0.2})
    trajs, manager, wall, _ = _play(manager_cls, slow if kind == "thread" else slow_judge, config)
    for t in trajs:
        assert t.masked and t.failure is not None and t.failure.stage == "reward"
        assert t.failure.error == "TimeoutError" and "reward_timeout_s=0.2s" in t.failure.message
    assert wall < 1.0 and manager.reward_counts()["timeouts"] == N


def test_the_default_reward_runs_inline(manager_cls: type[EnvManager]) -> None:
    trajs, manager, *_ = _play(manager_cls, None)
    assert all(t.final_reward == t.total_reward and not t.masked for t in trajs)
    assert manager.reward_pool.threads == 0 and manager.reward_counts()["calls"] == 0  # no thread hop


class _Judge:
    async def __call__(self, traj: Trajectory) -> float:
        return 3.0


def test_non_numbers_fail_and_the_pool_grows_to_its_cap_only() -> None:
    pool = RewardPool(2)

    async def go() -> tuple[float, BaseException | None]:
        traj = Trajectory("e", "g", "FrozenLake-v0", 0)
        assert await pool.score(_Judge(), traj) == 3.0 and pool.threads == 0  # an async __call__ is awaited
        slow = [pool.score(lambda t: time.sleep(0.2) or 2, traj) for _ in range(4)]
        values = await asyncio.gather(*slow)
        try:
            await pool.score(lambda t: "many", traj)
        except Exception as e:  # noqa: BLE001 - checked below
            return sum(values), e
        return sum(values), None

    total, error = asyncio.run(go())
    pool.shutdown()
    assert total == 8.0 and pool.threads == 2
    assert error is not None and getattr(error, "stage", None) == "reward"
    counts = pool.snapshot()
    assert counts["queue_wait_s"] > 0.15  # two of the four waited for a thread
    assert reward_metrics(counts)["reward/compute_s"] == pytest.approx(counts["busy_s"] / 6)


def test_scheduler_reports_the_reward_share() -> None:
    def slow(traj: Trajectory) -> float:
        time.sleep(0.1)
        return traj.total_reward

    config = SchedulerConfig(env_ids=["FrozenLake-v0"], num_env_groups=2, group_size=2, episode=CFG)

    async def go() -> dict[str, float]:
        scheduler = RolloutScheduler(RandomEngine(seed=0), LocalSource(), config, reward_fn=slow)
        try:
            return (await scheduler.run_batch()).metrics
        finally:
            assert await scheduler.close(10)

    m = asyncio.run(go())
    assert 0 < m["time/reward_share"] < 1 and 0 < m["time/generation_share"] < 1
    assert m["reward/compute_s"] == pytest.approx(0.1, abs=0.05) and m["reward/timeouts"] == 0
    assert "reward/adaptive_runs" not in m  # adaptive timeouts are off
