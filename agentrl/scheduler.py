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
slots (:func:`~rockroll.agentrl.env_mix.ratio_slots`: slot ``m`` of the run goes to the env furthest behind its share), so a
batch's mix depends on its index only and every env stays within one group of its exact share over
the run. Extra groups follow the stream past the batch; a failed group is replaced by one of the
same env, a complete group beyond its env's quota is cancelled: fast or failing envs never shift the
mix. Metrics are per env tag (``env/<tag>/...``).

Deadlines and hedging: an episode's deadline (``episode_timeout_s``) runs from its launch, so time
queued for a slot counts. With ``hedge_quantile`` set, an episode whose env call stalls gets a copy
on another sandbox and the first result wins (:mod:`rockroll.agentrl.hedging`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from rockroll.agentrl.config import SchedulerConfig
from rockroll.agentrl.engines.base import LLMEngine
from rockroll.agentrl.env_manager import EpisodeSpec, GenerationGate, RewardFn
from rockroll.agentrl.env_mix import RatioStream, ratio_slots
from rockroll.agentrl.env_source import EnvSource
from rockroll.agentrl.hedging import Hedger
from rockroll.agentrl.lockstep import make_env_manager
from rockroll.agentrl.reward_pool import reward_metrics
from rockroll.agentrl.trajectory import TrainSample, Trajectory

__all__ = ["RolloutScheduler", "RolloutBatch", "episode_metrics", "ratio_slots"]

log = logging.getLogger(__name__)

HEDGE_POLL_S = 0.05  # how often running episodes are checked for stalls


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


@dataclass
class _Group:
    gid: str
    env_id: str
    seed: int
    size: int
    launched: int = 0  # launch order within the batch
    entry: int = 0  # index into the config's env_ids
    batch: int = 0  # the batch that launched it
    carried: int = 0  # batches it has been carried into
    tasks: set[asyncio.Task[Trajectory]] = field(default_factory=set)
    done: list[Trajectory] = field(default_factory=list)
    masked: list[Trajectory] = field(default_factory=list)


def sample_seed(seed: int, batch: int, group: int, episode: int) -> int:
    """The sampling seed of one episode (its turns derive theirs from it): the same run, the same tokens."""
    return int(np.random.SeedSequence([seed, batch, group, episode]).generate_state(2, np.uint64)[0] >> 2)


def _episode_index(traj: Trajectory) -> int:
    tail = traj.episode_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def episode_metrics(trajectories: list[Trajectory]) -> dict[str, float]:
    """``env/<tag>/<metric>`` means over trajectories, per env tag (env id when no tag)."""
    by_tag: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        by_tag.setdefault(t.env_tag or t.env_id, []).append(t)
    out: dict[str, float] = {}
    for tag, trajs in sorted(by_tag.items()):
        rows = [t.metrics() for t in trajs]
        for key in rows[0]:
            out[f"env/{tag}/{key}"] = float(np.mean([r[key] for r in rows]))
    return out


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
        self._carry: dict[asyncio.Task[Trajectory], _Group] = {}  # running episodes of carried groups
        self._banked: list[_Group] = []  # complete groups beyond their env's quota, for the next batch
        watch = getattr(self.manager, "watch", None)
        self.hedger = Hedger(config, watch) if watch is not None and config.hedge_quantile is not None else None

    async def run_batch(self) -> RolloutBatch:
        """Play one batch; raises only :class:`~rockroll.agentrl.errors.FatalRolloutError` (bad config)."""
        cfg = self.config
        index = self.batches
        self.batches += 1
        rng = np.random.default_rng([cfg.seed, index])
        sem = asyncio.Semaphore(cfg.max_concurrent_episodes) if cfg.max_concurrent_episodes else None
        pending: dict[asyncio.Task[Trajectory], _Group] = {}
        complete: list[_Group] = []
        stats: Counter[str] = Counter()
        masked: list[Trajectory] = []
        if self._finished is None:
            self._finished = asyncio.Queue()
        finished = self._finished  # tasks carried from the last batch report here too
        carry = cfg.tail == "carry"
        started = time.monotonic()
        failures_before = self.manager.failures.copy()
        busy_before = self.manager.busy.copy()
        rewards_before = self.manager.reward_counts()

        async def episode(spec: EpisodeSpec) -> Trajectory:
            if sem is None:
                return await self.manager.run(spec)
            async with sem:
                return await self.manager.run(spec)

        # env entry of each group launched at the start (ratio mode: this batch's slots, then the extra groups')
        if self._stream is not None:
            first = self._stream.slots(index * cfg.num_env_groups, cfg.num_env_groups)
            quota = Counter(first)
            first += self._stream.peek(cfg.extra_groups)
        else:
            first = [n % len(cfg.env_ids) for n in range(cfg.num_env_groups + cfg.extra_groups)]
            quota = None
        delivered_by: Counter[int] = Counter()
        complete_at: list[float] = []

        def launch(entry: int | None = None) -> None:
            n = stats["groups_launched"]
            entry = n % len(cfg.env_ids) if entry is None else entry
            env_id = cfg.env_ids[entry]
            seed = int(rng.integers(0, cfg.max_env_seed))
            g = _Group(f"b{index}-g{n}", env_id, seed, cfg.group_size, n, entry, batch=index)
            tag, kwargs = cfg.tag(entry), cfg.kwargs(entry)
            for i in range(cfg.group_size + cfg.group_size_redundancy):
                spec = EpisodeSpec(env_id, g.seed, g.gid, f"{g.gid}/{i}", dict(kwargs), tag)
                spec.sample_seed = sample_seed(cfg.seed, index, n, i)
                spec.deadline = time.monotonic() + cfg.episode.episode_timeout_s  # queueing for a slot counts
                task = asyncio.create_task(episode(spec), name=spec.episode_id)
                task.add_done_callback(finished.put_nowait)
                g.tasks.add(task)
                pending[task] = g
                if self.hedger is not None:
                    self.hedger.track(task, spec)
            stats["groups_launched"] += 1
            stats["episodes_started"] += len(g.tasks)

        def cancel(g: _Group) -> list[asyncio.Task[Trajectory]]:
            tasks = [t for t in g.tasks if t in pending]
            for t in tasks:
                pending.pop(t)
                t.cancel()
                if self.hedger is not None:
                    self.hedger.forget(t)
            stats["episodes_cancelled"] += len(tasks)
            return tasks

        async def hedge_stalled(hedger: Hedger) -> None:
            """Start a copy of each stalled episode (within the budget); see :mod:`rockroll.agentrl.hedging`."""
            while True:
                await asyncio.sleep(HEDGE_POLL_S)
                for task, spec in hedger.due(pending, time.monotonic()):
                    if stats["hedges"] >= hedger.budget(stats["episodes_started"]):
                        break
                    g = pending[task]
                    copy = asyncio.create_task(episode(spec), name=f"{spec.episode_id}/hedge")
                    copy.add_done_callback(finished.put_nowait)
                    g.tasks.add(copy)
                    pending[copy] = g
                    hedger.pair(task, copy, spec)
                    stats["hedges"] += 1

        def accept(g: _Group) -> bool:
            """Deliver complete group ``g`` if its env's quota allows (carry mode: else bank it)."""
            if quota is not None and delivered_by[g.entry] >= quota[g.entry]:
                if carry and g.carried < cfg.max_carry_batches:
                    self._banked.append(g)
                return False
            complete.append(g)
            complete_at.append(time.monotonic() - started)
            delivered_by[g.entry] += 1
            stats["carried_delivered"] += g.batch != index
            return True

        cancelled: list[asyncio.Task[Trajectory]] = []
        settled = False
        watcher = asyncio.create_task(hedge_stalled(self.hedger)) if self.hedger is not None else None
        try:
            for g in self._take_tail(pending, cancelled, stats):
                if g.entry in first:
                    first.remove(g.entry)  # a carried group takes the place of a new one of its env
                if len(g.done) == g.size:  # banked: complete already
                    accept(g)
            for entry in first:
                launch(entry)
            while len(complete) < cfg.num_env_groups and pending:
                task = await finished.get()  # episodes report in the order they end
                g = pending.pop(task, None)
                if g is None:  # cancelled before: its group is settled
                    continue
                traj = task.result()  # only FatalRolloutError propagates
                stats["infra_retries"] += traj.infra_retries
                if self.hedger is not None:
                    counts, loser = self.hedger.settle(task, traj, pending)
                    if not counts:  # a masked copy of a hedged pair: the other plays on
                        stats["hedge_copies_masked"] += 1
                        continue
                    if loser is not None:
                        pending.pop(loser)
                        loser.cancel()
                        cancelled.append(loser)
                        stats["episodes_cancelled"] += 1
                        stats["hedge_wins"] += "/hedge" in task.get_name()
                if traj.masked:
                    g.masked.append(traj)
                    masked.append(traj)
                else:
                    g.done.append(traj)
                if len(g.done) == g.size and len(complete) < cfg.num_env_groups:
                    cancelled += cancel(g)
                    if not accept(g):
                        continue  # beyond its env's quota: surplus, like a straggler (carry mode: banked)
                    if not carry and quota is not None and delivered_by[g.entry] >= quota[g.entry]:
                        for other in {id(o): o for o in pending.values() if o.entry == g.entry}.values():
                            cancelled += cancel(other)  # the env's quota is met: its other groups are surplus
                elif len(g.masked) > cfg.group_size_redundancy and len(g.done) < g.size:
                    stats["groups_failed"] += 1
                    cancelled += cancel(g)
                    wanted = quota is None or delivered_by[g.entry] < quota[g.entry]
                    if wanted and stats["groups_launched"] < cfg.group_launch_limit:
                        launch(None if quota is None else g.entry)  # ratio mode: the same env, the mix holds
            settled = True
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            if carry and settled:  # the long tail plays on into the next batch
                self._carry = dict(pending)
                stats["groups_carried_out"] += len({id(g) for g in pending.values()})
            else:
                for g in {id(g): g for g in pending.values()}.values():
                    cancelled += cancel(g)
            if cancelled:
                await asyncio.gather(*cancelled, return_exceptions=True)
        if len(complete) < cfg.num_env_groups:
            log.warning("batch %d: only %d of %d groups completed", index, len(complete), cfg.num_env_groups)
        elapsed = time.monotonic() - started
        # launch order, not finishing order: in lock-step mode the same seed gives the same batch
        ordered = sorted(complete[: cfg.num_env_groups], key=lambda g: (g.batch, g.launched))
        groups = [sorted(g.done, key=_episode_index)[: g.size] for g in ordered]
        delivered = [t for g in groups for t in g]
        stats.update({f"infra_failures/{k}": v for k, v in (self.manager.failures - failures_before).items()})
        metrics: dict[str, float] = {f"rollout/{k}": float(v) for k, v in stats.items()}
        busy = self.manager.busy - busy_before
        if busy["generation"] + busy["env"] > 0:  # how the rollout's time splits between the engine and the envs
            metrics["time/generation_share"] = busy["generation"] / (busy["generation"] + busy["env"])
        if busy["reward"] > 0:  # rewards run in a pool of their own, overlapping generation and env steps
            metrics["time/reward_share"] = busy["reward"] / (busy["generation"] + busy["env"] + busy["reward"])
        metrics.update(reward_metrics(self.manager.reward_counts() - rewards_before))
        metrics.update(
            {
                "rollout/groups_delivered": float(len(groups)),
                "rollout/groups_short": float(cfg.num_env_groups - len(groups)),
                "rollout/episodes_delivered": float(len(delivered)),
                "rollout/episodes_masked": float(len(masked)),
                "rollout/agent_failures": float(sum(t.failure is not None for t in delivered)),
                "rollout/episodes_per_s": len(delivered) / elapsed if elapsed > 0 else 0.0,
                "time/rollout_s": elapsed,
            }
        )
        if complete_at and elapsed > 0:  # the long tail: the wait for the last fifth of the groups
            k = max(0, math.ceil(0.8 * cfg.num_env_groups) - 1)
            metrics["time/tail_share"] = (elapsed - complete_at[min(k, len(complete_at) - 1)]) / elapsed
        metrics.update(episode_metrics(delivered))
        if len(cfg.env_ids) > 1:
            for entry in range(len(cfg.env_ids)):
                metrics[f"env/{cfg.tag(entry)}/groups"] = float(sum(g.entry == entry for g in ordered))
        layout: Literal["concat", "per_turn"] = "concat" if cfg.episode.history == "full" else "per_turn"
        return RolloutBatch(groups, masked, metrics, index, layout, [index - g.batch for g in ordered])

    def _take_tail(
        self,
        pending: dict[asyncio.Task[Trajectory], _Group],
        cancelled: list[asyncio.Task[Trajectory]],
        stats: Counter[str],
    ) -> list[_Group]:
        """Move the last batch's carried and banked groups into this one (those carried too long are cancelled)."""
        carry, self._carry = self._carry, {}
        banked, self._banked = self._banked, []
        groups = list({id(g): g for g in carry.values()}.values())
        taken: list[_Group] = []
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
