"""The rollout scheduler: one batch of env groups, queue-scheduled, with redundancy.

A batch is ``num_env_groups`` groups of ``group_size`` episodes; every episode of a group plays
the group's env on the group's seed (what GRPO-style group advantages need). All episodes run as
asyncio tasks at once (or at most ``max_concurrent_episodes``): each sends its generation request
the moment its env is ready and steps its env the moment the response is back (queue scheduling;
the engine batches whatever requests are waiting), and its reward is computed as soon as it ends.
Nothing waits for the slowest env of a turn.

Redundancy: each group starts ``group_size + group_size_redundancy`` episodes and the batch
starts ``num_env_groups + extra_groups`` groups. The first ``group_size`` finished episodes of a
group win and its stragglers are cancelled; the first ``num_env_groups`` complete groups win and
the rest are cancelled. Cancelled episodes give their envs (sandbox sessions) back. A group with
more masked (infra-failed) episodes than its redundancy can absorb is dropped and replaced by a
fresh group, up to ``max_group_launches`` groups per batch.

Tail batching (``tail: carry``): the groups still running when a batch has its ``num_env_groups``
are not cancelled but carried into the next batch. They keep playing meanwhile (also while the
trainer updates) and take the place of that many new groups, so a batch never waits for its long
tail and no started episode is thrown away. A carried group that is still running after
``max_carry_batches`` more batches is cancelled; a group that completes beyond its env's quota
(ratio mode) is banked for the next batch. Carried turns come from older weights: a group carried
through ``c`` batches may be ``c`` weight versions older than the async rollout's bound allows
(``RolloutBatch.carried``: the bound is ``async_generation_ratio + max_carry_batches`` for carried
groups, so they are not dropped as stale on arrival), and the trainer's off-policy correction
(``tis_cap``) applies to them.

Env mixing: without ``env_ratios`` the groups cycle through ``env_ids``. With ratios (ROLL's tag
ratios) every env entry gets a quota of the batch's groups from one deterministic stream of group
slots (:func:`~rockroll.agentrl.rollout.env_mix.ratio_slots`: slot ``m`` of the run goes to the env furthest behind its share), so a
batch's mix depends on its index only and every env stays within one group of its exact share over
the run. Extra groups follow the stream past the batch; a failed group is replaced by one of the
same env, a complete group beyond its env's quota is cancelled: fast or failing envs never shift the
mix. Metrics are per env tag (``env/<tag>/...``).

Deadlines and hedging: an episode's deadline (``episode_timeout_s``) runs from its launch, so time
queued for a slot counts. With ``hedge_quantile`` set, an episode whose env call stalls gets a copy
on another sandbox and the first result wins (:mod:`rockroll.agentrl.rollout.hedging`).

One batch's bookkeeping while it plays (launching, settling, cancelling, metrics) is
:class:`~rockroll.agentrl.rollout.batch_run.BatchRun`; the scheduler owns what outlives a batch (the
carried and banked groups, the ratio stream, the env manager).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from rockroll.agentrl.engines.base import LLMEngine
from rockroll.agentrl.rollout.batch_run import BatchRun, Group
from rockroll.agentrl.rollout.config import SchedulerConfig
from rockroll.agentrl.rollout.env_manager import RewardFn
from rockroll.agentrl.rollout.env_mix import RatioStream, ratio_slots
from rockroll.agentrl.rollout.gate import GenerationGate
from rockroll.agentrl.rollout.hedging import Hedger
from rockroll.agentrl.rollout.lockstep import make_env_manager
from rockroll.agentrl.sources.kinds import EnvSource
from rockroll.agentrl.trajectory import TrainSample, Trajectory

__all__ = ["RolloutScheduler", "RolloutBatch", "ratio_slots"]

log = logging.getLogger(__name__)


@dataclass
class RolloutBatch:
    """What one :meth:`RolloutScheduler.run_batch` delivers.

    Attributes:
        groups: complete groups, each ``group_size`` trajectories on one seed.
        masked: episodes lost to infra failures (never trained on; kept for metrics and debugging).
        metrics: ``rollout/...``, ``env/<tag>/...`` and ``time/...`` numbers.
        index: the batch's number in this scheduler.
        layout: the training-row layout the history mode allows (``concat`` for full history,
            ``per_turn`` for last-k history).
        carried: per group, the batches it was carried through before this one (0: launched by it);
            its staleness allowance grows by that much (tail batching).
    """

    groups: list[list[Trajectory]]
    masked: list[Trajectory] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    index: int = 0
    layout: Literal["concat", "per_turn"] = "concat"
    carried: list[int] = field(default_factory=list)

    @property
    def trajectories(self) -> list[Trajectory]:
        return [t for g in self.groups for t in g]

    @property
    def oldest_weight_version(self) -> int:
        return min((t.oldest_weight_version for t in self.trajectories if t.turns), default=0)

    def samples(self, layout: Literal["concat", "per_turn"] | None = None) -> list[TrainSample]:
        """Training rows of every delivered trajectory (default layout: :attr:`layout`)."""
        return [s for t in self.trajectories for s in t.to_samples(layout or self.layout)]


class RolloutScheduler:
    """Produces rollout batches (see the module docstring).

    Args:
        engine: the LLM engine shared by all episodes.
        source: where envs come from.
        config: the batch shape and how episodes are played.
        reward_fn: final reward of an episode (default: the sum of env rewards).
    """

    def __init__(
        self, engine: LLMEngine, source: EnvSource, config: SchedulerConfig, *, reward_fn: RewardFn | None = None
    ) -> None:
        self.engine = engine
        self.source = source
        self.config = config
        self.gate = GenerationGate()
        per_batch = (config.num_env_groups + config.extra_groups) * (config.group_size + config.group_size_redundancy)
        threads = min(256, max(16, config.max_concurrent_episodes or per_batch))
        self.manager = make_env_manager(
            engine, source, config.episode, threads=threads, reward_fn=reward_fn, gate=self.gate
        )
        self.batches = config.first_batch
        self._stream = RatioStream(config.env_ratios) if config.env_ratios else None
        self._finished: asyncio.Queue[asyncio.Task[Trajectory]] | None = None  # one for the scheduler's life
        self._carry: dict[asyncio.Task[Trajectory], Group] = {}  # running episodes of carried groups
        self._banked: list[Group] = []  # complete groups beyond their env's quota, for the next batch
        self.hedger = Hedger(config, self.manager.watch) if config.hedge_quantile is not None else None

    async def run_batch(self) -> RolloutBatch:
        """Play one batch; raises only :class:`~rockroll.agentrl.errors.FatalRolloutError` (bad config)."""
        cfg = self.config
        index = self.batches
        self.batches += 1
        if self._finished is None:
            self._finished = asyncio.Queue()  # tasks carried from the last batch report here too
        run = BatchRun(cfg, self.manager, self.hedger, index, self._finished, self._stream)
        tail = self._take_tail(run.pending, run.cancelled, run.stats)
        try:
            self._carry = await run.play(tail)
        finally:
            self._banked.extend(run.banked)
        if len(run.complete) < cfg.num_env_groups:
            log.warning("batch %d: only %d of %d groups completed", index, len(run.complete), cfg.num_env_groups)
        ordered, groups = run.delivered()
        metrics = run.metrics(ordered, groups)
        layout: Literal["concat", "per_turn"] = "concat" if cfg.episode.history == "full" else "per_turn"
        return RolloutBatch(groups, run.masked, metrics, index, layout, [index - g.batch for g in ordered])

    def _take_tail(
        self,
        pending: dict[asyncio.Task[Trajectory], Group],
        cancelled: list[asyncio.Task[Trajectory]],
        stats: Counter[str],
    ) -> list[Group]:
        """Move the last batch's carried and banked groups into this one (those carried too long are cancelled)."""
        carry, self._carry = self._carry, {}
        banked, self._banked = self._banked, []
        groups = list({id(g): g for g in carry.values()}.values())
        taken: list[Group] = []
        for g in groups + banked:
            g.carried += 1
            if g.carried > self.config.max_carry_batches:
                stats["groups_carry_expired"] += 1
                for t in [t for t, o in carry.items() if o is g]:
                    t.cancel()
                    cancelled.append(t)
                    stats["episodes_cancelled"] += 1
                continue
            taken.append(g)
        stats["groups_carried_in"] += len(taken)
        for t, g in carry.items():
            if any(g is k for k in taken):
                pending[t] = g
        return taken

    async def drop_tail(self) -> None:
        """Cancel the carried groups' episodes (their envs are given back) and forget banked groups."""
        carry, self._carry, self._banked = self._carry, {}, []
        for t in carry:
            t.cancel()
        if carry:
            await asyncio.gather(*carry, return_exceptions=True)

    async def close(self, timeout_s: float = 30.0) -> bool:
        """Wait for every env to be given back, then stop the thread pool; False if some hung."""
        await self.drop_tail()
        ok = await self.manager.drain(timeout_s)
        if ok:
            await asyncio.to_thread(self.manager.shutdown)
        return ok

    def __repr__(self) -> str:
        c = self.config
        return f"RolloutScheduler({c.num_env_groups}x{c.group_size}, source={self.source.name})"
