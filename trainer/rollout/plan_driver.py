"""Plan mode behind the trainer's rollout boundary (:class:`rockroll.trainer.rollout.base.Rollout`).

Each step plays ``num_env_groups`` (+ ``extra_groups``) groups of ``group_size`` (+ redundancy) plans
with :class:`rockroll.trainer.rollout.plan.PlanRollout`, batched by the engine; with
``async_generation_ratio > 0`` the next step's batch is generated while the trainer updates
(prefetched one step ahead; a checkpoint keeps it, so a resumed run trains on the same batch).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import random
from typing import TYPE_CHECKING, Any

from rockroll.trainer.evaluation.evaluate import evaluate_plans
from rockroll.trainer.rollout.base import Rollout
from rockroll.trainer.rollout.engine_sync import EngineSync
from rockroll.trainer.rollout.plan import PlanRollout, PlanTask, plan_batch

if TYPE_CHECKING:
    from rockroll.agentrl.trajectory import Trajectory
    from rockroll.trainer.config import TrainConfig

__all__ = ["PlanDriver", "plan_tasks"]


def plan_tasks(cfg: TrainConfig, step: int) -> list[PlanTask]:
    """The episodes of ``step``: ``num_env_groups`` (+ ``extra_groups``) training seeds, ``group_size``
    (+ ``group_size_redundancy``) samples each (``rollout.scheduler``)."""
    r, b = cfg.rollout, cfg.rollout.scheduler
    rng = random.Random(cfg.seed * 1_000_003 + step)
    tasks = []
    for g in range(b.num_env_groups + b.extra_groups):
        seed = rng.randrange(r.train_seeds or r.eval_seed_offset)
        tasks += [
            PlanTask(seed, f"s{step}g{g}", f"s{step}g{g}e{i}") for i in range(b.group_size + b.group_size_redundancy)
        ]
    return tasks


class PlanDriver(Rollout):
    """Training batches and greedy evaluation of plan mode (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, tokenizer: Any, engine: Any, source: Any, *, sync: EngineSync | None = None):
        r = cfg.rollout
        self.cfg, self.engine = cfg, engine
        self.sync = sync or EngineSync(engine)
        self.tags = [r.env_mix()[0].tag]
        self.plans = PlanRollout(
            r.env_id, r.env_kwargs, tokenizer, source=source, **dict(r.plan),
            env_workers=r.scheduler.max_concurrent_episodes or 8, tag=self.tags[0], limits=r.episode,
        )  # fmt: skip
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch")
        self._prefetch: cf.Future | None = None
        self._buffer: list[Trajectory] | None = None

    def _play(self, step: int) -> list[Trajectory]:
        ep = self.cfg.rollout.episode
        coro = self.plans.run(
            self.engine, plan_tasks(self.cfg, step), max_new_tokens=ep.max_tokens_per_turn,
            temperature=ep.temperature, top_p=ep.top_p, sample_seed=self.cfg.seed * 7919 + step,
        )  # fmt: skip
        return asyncio.run(coro)

    def next_batch(self, step: int) -> tuple[list[Trajectory], dict[str, float]]:
        """Step ``step``'s complete groups of unmasked episodes, as the multi-turn scheduler delivers them."""
        if self._buffer is not None:
            trajs, self._buffer = self._buffer, None
        elif self._prefetch is not None:
            trajs, self._prefetch = self._prefetch.result(), None
        else:
            trajs = self._play(step)
        b = self.cfg.rollout.scheduler
        if b.async_generation_ratio > 0 and step + 1 < self.cfg.total_steps:
            self._prefetch = self._pool.submit(self._play, step + 1)
        delivered, metrics = plan_batch(trajs, b.num_env_groups, b.group_size)
        metrics["rollout/engine_restarts"] = self.sync.new_restarts()
        return delivered, metrics

    def evaluate(self, seeds: list[int], prefix: str = "eval") -> dict[str, float]:
        ep = self.cfg.rollout.episode
        return evaluate_plans(self.plans, self.engine, seeds, max_new_tokens=ep.max_tokens_per_turn, prefix=prefix)

    def release(self) -> None:
        if self._prefetch is None:  # nothing generates until the new weights
            self.sync.release()

    def update_weights(self, weights: Any, version: int) -> dict[str, float]:
        return self.sync.push(weights, version)

    def start_at(self, step: int, pending: Any = None) -> None:
        self._buffer = pending

    def pending(self) -> list[Trajectory] | None:
        if self._prefetch is not None:
            self._buffer, self._prefetch = self._prefetch.result(), None
        return self._buffer

    def close(self) -> None:
        try:
            if self._prefetch is not None:
                self._prefetch.result()
            self._pool.shutdown()
            self.plans.close()
        finally:
            asyncio.run(self.engine.close())
