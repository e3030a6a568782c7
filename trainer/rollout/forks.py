"""Fork-based per-turn baselines: the value of a state a turn acted from, estimated by forking the
episode there and letting the current policy play ``k`` short continuations.

For a chosen turn ``t`` of an episode, the env is rebuilt at that turn (reset on the episode's seed,
its actions up to ``t`` replayed, the resulting observation checked against the one the policy saw),
snapshotted, and each continuation starts from that snapshot with a fresh RNG stream
(:func:`rockroll.envs.core.reseed_snapshot`: same state, independent slips). The discounted returns
of the continuations average to ``V(s_t)``; :func:`rockroll.trainer.algos.turn_credit.fork_advantages`
turns it into the advantage ``G_t - V(s_t)`` of the turn actually taken. A fork whose env fails, or
whose replay does not reach the same observation, yields no value (None): that turn falls back to the
episode advantage, and the failure is counted, never scored.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
from rockroll.agentrl.models.chat import PromptBuilder, format_observation
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.trajectory import Trajectory
from rockroll.envs.core import reseed_snapshot

__all__ = ["ForkEstimator"]


class ForkEstimator:
    """Per-turn ``V(s_t)`` from forked continuations (see the module docstring).

    Args:
        engine: the rollout engine (current weights).
        source: where envs come from (in-process or sandbox sessions).
        env_id, env_kwargs: the training env.
        episode: how turns are played (prompt format, temperature, turn cap).
        k: continuations per forked turn.
        turns: forked turns per episode (spread evenly over the episode).
        gamma: discount of the continuation returns (the same as the credit's).
    """

    def __init__(
        self,
        engine: Any,
        source: Any,
        env_id: str,
        env_kwargs: dict[str, Any],
        episode: EpisodeConfig,
        *,
        k: int = 4,
        turns: int = 2,
        gamma: float = 0.95,
        seed: int = 0,
    ) -> None:
        self.engine, self.source = engine, source
        self.env_id, self.env_kwargs, self.episode = env_id, dict(env_kwargs), episode
        self.k, self.turns, self.gamma = k, turns, gamma
        self.rng = random.Random(seed)
        self.failures = 0

    def _chosen(self, traj: Trajectory) -> list[int]:
        n = len(traj.turns)
        if n <= 1 or self.turns <= 0:
            return []
        step = max(1, n // (self.turns + 1))
        return sorted({min(n - 1, step * (i + 1)) for i in range(self.turns)})

    def _snapshot(self, traj: Trajectory, t: int) -> dict[str, Any] | None:
        """The env state turn ``t`` acted from, rebuilt by replaying the episode's actions."""
        env = self.source.open(self.env_id, self.env_kwargs)
        try:
            obs, _ = env.reset(seed=traj.seed)
            for turn in traj.turns[:t]:
                obs, *_ = env.step(turn.action_text)
            if format_observation(obs, self.episode.observation_format) != traj.turns[t].state_key:
                return None  # the env did not replay deterministically: no value rather than a wrong one
            return env.get_state()
        finally:
            self.source.close(env)

    async def _continue(self, traj: Trajectory, t: int, snapshot: dict[str, Any], seed: int) -> float:
        """Discounted return of one continuation from ``snapshot`` by the current policy."""
        loop = asyncio.get_running_loop()
        env = await loop.run_in_executor(None, self.source.open, self.env_id, self.env_kwargs)
        try:
            await loop.run_in_executor(None, lambda: env.reset(seed=traj.seed))
            await loop.run_in_executor(None, env.set_state, reseed_snapshot(snapshot, seed))
            ep = self.episode
            system = env.system_prompt() if ep.system_prompt == "env" else ""
            builder = PromptBuilder(self.engine.tokenizer, system, history=ep.history, last_k=ep.history_k,
                                    max_context_tokens=ep.max_context_tokens, max_new_tokens=ep.max_tokens_per_turn)  # fmt: skip
            prompt = builder.first_prompt(traj.turns[t].state_key)
            params = SamplingParams(max_new_tokens=ep.max_tokens_per_turn, temperature=ep.temperature, top_p=ep.top_p)
            total, discount = 0.0, 1.0
            for i in range(ep.max_turns - t):
                result = await self.engine.generate(GenerationRequest(prompt, params, request_id=f"fork{seed}/{i}"))
                text = builder.add_response(result.token_ids)
                obs, reward, terminated, truncated, _ = await loop.run_in_executor(None, env.step, text)
                total += discount * float(reward)
                discount *= self.gamma
                if terminated or truncated:
                    break
                prompt = builder.next_prompt(format_observation(obs, ep.observation_format))
            return total
        finally:
            self.source.close(env)

    async def _value(self, traj: Trajectory, t: int) -> float | None:
        loop = asyncio.get_running_loop()
        try:
            snapshot = await loop.run_in_executor(None, self._snapshot, traj, t)
            if snapshot is None:
                self.failures += 1
                return None
            seeds = [self.rng.randrange(2**31) for _ in range(self.k)]
            returns = await asyncio.gather(*(self._continue(traj, t, snapshot, s) for s in seeds))
        except Exception:  # noqa: BLE001 - an infra failure costs this turn its baseline, never the run
            self.failures += 1
            return None
        return sum(returns) / len(returns)

    async def values(self, trajs: list[Trajectory]) -> dict[str, list[float | None]]:
        """``{episode_id: [V(s_t) or None per turn]}`` for the non-masked episodes of ``trajs``."""
        out: dict[str, list[float | None]] = {}
        jobs = []
        for traj in trajs:
            if traj.masked or not traj.turns:
                continue
            out[traj.episode_id] = [None] * len(traj.turns)
            jobs += [(traj, t) for t in self._chosen(traj)]
        found = await asyncio.gather(*(self._value(traj, t) for traj, t in jobs))
        for (traj, t), v in zip(jobs, found, strict=True):
            out[traj.episode_id][t] = v
        return out
