"""Lock-step turns (``EpisodeConfig.lockstep``): the same episodes as the per-episode path, played in rounds.

With per-turn sampling seeds (the scheduler's ``sample_seed``) both paths sample the same tokens, so
a batch played in rounds must equal the batch played episode by episode, trajectory for trajectory,
in process and through process sandboxes; the error model is shared (``test_rollout_errors.py`` runs
every case in both modes).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("torch")

from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig  # noqa: E402
from rockroll.agentrl.rollout.lockstep import LockstepEnvManager  # noqa: E402
from rockroll.agentrl.rollout.scheduler import RolloutBatch, RolloutScheduler  # noqa: E402
from rockroll.agentrl.sources.kinds import LocalSource, SandboxSource  # noqa: E402
from tests.agentrl.test_rollout_env import check_trajectory, hf_engine, sandbox_manager, tiny_model  # noqa: E402, F401

EPISODE = dict(max_turns=6, max_tokens_per_turn=8, temperature=1.5, history="last_k", history_k=0, max_retries=1)


def _batch(engine: Any, source: Any, lockstep: bool, envs: list[str]) -> tuple[RolloutBatch, Any]:
    config = SchedulerConfig(
        env_ids=envs, num_env_groups=4, group_size=4, seed=7, episode=EpisodeConfig(**EPISODE, lockstep=lockstep)
    )

    async def run() -> tuple[RolloutBatch, Any]:
        scheduler = RolloutScheduler(engine, source, config)
        try:
            return await scheduler.run_batch(), scheduler.manager
        finally:
            assert await scheduler.close(30)

    return asyncio.run(run())


def _signature(batch: RolloutBatch) -> list[Any]:
    return [
        (t.episode_id, t.seed, t.success, t.truncated, [(turn.prompt_ids, turn.response_ids) for turn in t.turns])
        for t in batch.trajectories
    ]


def test_rounds_play_the_same_episodes_as_the_per_episode_path(hf_engine: Any) -> None:  # noqa: F811
    envs = ["FrozenLake-v0", "Sokoban-v0"]
    per_episode, _ = _batch(hf_engine, LocalSource(), False, envs)
    rounds, manager = _batch(hf_engine, LocalSource(), True, envs)
    assert isinstance(manager, LockstepEnvManager)
    assert _signature(rounds) == _signature(per_episode)
    turns = sum(len(t.turns) for t in rounds.trajectories)
    assert turns > 16 and manager.round_turns == turns
    assert manager.rounds <= 2 * EPISODE["max_turns"]  # a round carries every live episode's turn
    for batch in (per_episode, rounds):  # the rollout's time split between the engine and the envs
        assert 0.0 < batch.metrics["time/generation_share"] < 1.0
    for t in rounds.trajectories:
        check_trajectory(t, hf_engine.tokenizer, "last_k")
    for a, b in zip(rounds.trajectories, per_episode.trajectories, strict=True):
        for x, y in zip(a.turns, b.turns, strict=True):
            assert max(abs(p - q) for p, q in zip(x.logprobs, y.logprobs, strict=True)) < 1e-4


def test_rounds_through_process_sandboxes_match_and_give_every_session_back(
    hf_engine: Any,  # noqa: F811
    sandbox_manager: Any,  # noqa: F811
) -> None:
    source = SandboxSource(sandbox_manager)
    rounds, _ = _batch(hf_engine, source, True, ["FrozenLake-v0"])
    local, _ = _batch(hf_engine, LocalSource(), True, ["FrozenLake-v0"])
    assert _signature(rounds) == _signature(local)
    assert source.open_count == 0
