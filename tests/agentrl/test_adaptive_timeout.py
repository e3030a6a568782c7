"""Adaptive test-run timeouts: RollPacker's rule per task, its counters, and the env manager's
plumbing (the ``test_timeout_s`` reset option out, the last step's ``test_run_s`` back)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

import rockroll.envhub as envhub
from rockroll.agentrl.engines.random_engine import RandomEngine
from rockroll.agentrl.rewards.adaptive_timeout import AdaptiveTimeouts
from rockroll.agentrl.rewards.pool import reward_metrics
from rockroll.agentrl.rollout.config import AdaptiveTimeoutConfig, EpisodeConfig
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
from rockroll.agentrl.sources.kinds import LocalSource
from rockroll.envs.core import StepOutcome, TextEnv


def test_the_rule_per_task() -> None:
    at = AdaptiveTimeouts(t_min_s=2.0, lam=3.0, t_max_s=60.0)
    assert at.timeout("a") == 60.0  # no correct answer yet
    at.observe("a", 5.0, correct=False, timed_out=False)
    assert at.timeout("a") == 60.0  # wrong answers never anchor
    at.observe("a", 0.3, correct=True, timed_out=False)
    assert at.timeout("a") == 2.0  # max(t_min, 3 * 0.3)
    at.observe("a", 4.0, correct=True, timed_out=False)
    assert at.timeout("a") == 12.0  # the longest correct run anchors
    at.observe("a", 1.0, correct=True, timed_out=False)
    assert at.timeout("a") == 12.0  # a shorter one does not lower it
    at.observe("a", 30.0, correct=True, timed_out=False)
    assert at.timeout("a") == 60.0  # capped at t_max
    assert at.timeout("b") == 60.0  # per task


def test_cutoffs_are_timeouts_below_t_max() -> None:
    at = AdaptiveTimeouts(1.0, 2.0, 10.0)
    at.observe("a", 10.0, correct=False, timed_out=True)  # at t_max: not a cut-off
    at.observe("a", 0.5, correct=True, timed_out=False)
    at.observe("a", 1.0, correct=False, timed_out=True)  # at T = 1: a cut-off
    at.observe("a", 1.0, correct=True, timed_out=True, timeout_s=1.0)  # timed out: never anchors
    assert at.timeout("a") == 1.0
    c = at.snapshot()
    assert c["adaptive_runs"] == 4 and c["adaptive_cutoffs"] == 2 and c["adaptive_saved_s"] == 18.0


def test_bad_parameters_raise() -> None:
    for args in ((0, 2, 10), (1, -1, 10), (1, 2, float("inf")), (5, 2, 1), (True, 2, 10)):
        with pytest.raises(ValueError):
            AdaptiveTimeouts(*args)
    with pytest.raises(ValueError, match="t_min_s"):
        AdaptiveTimeoutConfig(t_min_s=5, t_max_s=1)


def test_a_seed_learns_its_task_and_tasks_share_anchors() -> None:
    at = AdaptiveTimeouts(1.0, 2.0, 10.0)
    assert at.reset_timeout("E", 7) == 10.0
    end = {"test_run_s": 2.0, "tests_timed_out": False, "success": True}
    assert at.episode_ended("E", 7, {"task_id": "t1"}, end, 10.0)
    assert at.reset_timeout("E", 7) == 4.0  # seed 7 picks t1, whose anchor is 2 s
    assert at.reset_timeout("E", 8) == 10.0  # a seed never seen: its task is unknown
    assert not at.episode_ended("E", 8, {"task_id": "t1"}, {"success": True}, 10.0)  # no test run reported
    assert at.reset_timeout("E", 8) == 4.0  # now known to pick t1 too
    assert at.reset_timeout("F", 7) == 10.0  # another env
    c = at.snapshot()
    assert c["adaptive_issued"] == 5 and c["adaptive_timeout_s"] == 38.0 and c["adaptive_runs"] == 1


class _TestsEnv(TextEnv[str]):
    """Every action submits: a test run of ``run_s`` seconds on task ``t0`` (own limit 5 s), killed past the
    limit the reset option's table gives ``t0``."""

    instructions = "Submit."
    seen: ClassVar[list[float | None]] = []

    def __init__(self, run_s: float = 0.3) -> None:
        super().__init__()
        self.run_s = run_s
        self.limit: float | None = None

    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        self.limit = min(options.get("test_timeouts", {}).get("t0", 5.0), 5.0)
        self.seen.append(self.limit)
        return {"task_id": "t0"}

    def _parse_action(self, answer: str) -> str | None:
        return answer

    def _step(self, action: str) -> StepOutcome[str]:
        timed_out = self.limit is not None and self.run_s > self.limit
        info = {
            "test_run_s": self.limit if timed_out else self.run_s, "tests_timed_out": timed_out,
            "test_timeout_s": self.limit,
        }  # fmt: skip
        return StepOutcome("done", 0.0 if timed_out else 1.0, True, effective=True, success=not timed_out, info=info)

    def _render(self) -> str:
        return "tests"

    def _get_state(self) -> dict[str, Any]:
        return {}

    def _set_state(self, data: dict[str, Any]) -> None:
        pass


def test_the_env_manager_sends_the_timeout_and_observes_the_run() -> None:
    envhub.register("TestTimedTests-v0", _TestsEnv, override=True)
    _TestsEnv.seen.clear()
    adaptive = AdaptiveTimeoutConfig(t_min_s=0.5, lam=2.0, t_max_s=5.0)
    config = EpisodeConfig(max_turns=2, max_tokens_per_turn=32, adaptive_reward_timeout=adaptive)
    manager = EnvManager(RandomEngine(seed=0), LocalSource(), config)

    async def go(seeds: list[int]) -> list[float]:
        before = manager.reward_counts()
        for s in seeds:
            traj = await manager.run(EpisodeSpec("TestTimedTests-v0", seed=s))
            assert not traj.masked and traj.last_info["test_run_s"] == 0.3
        m = reward_metrics(manager.reward_counts() - before)
        return [m["reward/adaptive_timeout_s"], m["reward/adaptive_runs"]]

    try:
        # seed 1: t0 has no correct run yet, its own limit; seed 2 (never seen) already gets t0's entry, 2 * 0.3
        assert asyncio.run(go([1, 2])) == pytest.approx([2.8, 2.0])
        assert asyncio.run(go([3])) == pytest.approx([0.6, 1.0])
    finally:
        manager.shutdown()
    assert _TestsEnv.seen == [5.0, 0.6, 0.6]
    off = EpisodeConfig(adaptive_reward_timeout=adaptive.model_copy(update={"env_ids": ["SWE-v0"]}))
    assert EnvManager(RandomEngine(), LocalSource(), off)._reset_options(EpisodeSpec("TestTimedTests-v0", 1)) is None
