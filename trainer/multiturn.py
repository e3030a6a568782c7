"""Multi-turn rollout for the trainer through agentrl's scheduler and sample buffer.

``rollout.mode: multiturn``: one action per turn, the env answering each turn, whole episodes
played by :class:`rockroll.agentrl.scheduler.RolloutScheduler` (queue scheduling, sandboxes, failure
boundaries) and buffered by :class:`rockroll.agentrl.async_rollout.AsyncRollout` (background production,
``async_generation_ratio`` bounding staleness). Those are asyncio objects: they live on an event
loop in a background thread (:class:`LoopThread`) and the synchronous controller calls into it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from rockroll.agentrl.async_rollout import AsyncRollout
from rockroll.agentrl.config import EpisodeConfig, SchedulerConfig
from rockroll.agentrl.scheduler import RolloutScheduler

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig

__all__ = ["LoopThread", "MultiTurnDriver"]


class LoopThread:
    """An asyncio event loop running in a daemon thread; :meth:`run` executes a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="trainer-rollout-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


class MultiTurnDriver:
    """Training batches and greedy evaluation from agentrl's scheduler (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, engine: Any, source: Any) -> None:
        r = cfg.rollout
        self.cfg, self.engine, self.source = cfg, engine, source
        self.tag = r.env_id.split("-")[0]
        self.episode = EpisodeConfig(
            max_turns=r.max_actions,
            max_tokens_per_turn=r.max_new_tokens,
            temperature=r.temperature,
            top_p=r.top_p,
            history="full",
        )
        self.sched_cfg = SchedulerConfig(
            env_ids=[r.env_id],
            env_kwargs={r.env_id: dict(r.env_kwargs)},
            num_env_groups=r.groups_per_step,
            group_size=r.group_size,
            async_generation_ratio=r.async_generation_ratio,
            seed=cfg.seed,
            episode=self.episode,
        )
        self.loop = LoopThread()
        self.producer = self.loop.run(self._start())

    async def _start(self) -> Any:
        self.scheduler = RolloutScheduler(self.engine, self.source, self.sched_cfg)
        producer = AsyncRollout(self.scheduler)
        producer.start()
        return producer

    def next_batch(self) -> tuple[list[Any], dict[str, float]]:
        """The next buffered batch: its trajectories (complete groups) and its rollout metrics."""
        batch = self.loop.run(self.producer.get_batch())
        return batch.trajectories, dict(batch.metrics)

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Pause generation, load the weights into the engine, resume (agentrl's protocol)."""
        self.loop.run(self.producer.update_weights(state_dict, version))

    def evaluate(self, episodes: int, seed: int, prefix: str = "eval") -> dict[str, float]:
        """Greedy success over ``episodes`` episodes (a fresh scheduler: the same env seeds every time)."""
        greedy = self.episode.model_copy(update={"temperature": 0.0})
        update = {"num_env_groups": episodes, "group_size": 1, "async_generation_ratio": 0, "seed": seed}
        cfg = self.sched_cfg.model_copy(update={**update, "episode": greedy})

        async def run() -> Any:
            sched = RolloutScheduler(self.engine, self.source, cfg)
            try:
                return await sched.run_batch()
            finally:
                await sched.close()

        batch = self.loop.run(run())
        trajs = batch.trajectories
        return {f"{prefix}/{self.tag}/success": sum(t.success for t in trajs) / max(len(trajs), 1)}

    def close(self) -> None:
        async def stop() -> None:
            await self.producer.stop()
            await self.scheduler.close()

        try:
            self.loop.run(stop(), timeout=60)
        finally:
            self.loop.close()
