"""One rollout batch while it plays (:class:`BatchRun`): launch groups, settle finished episodes,
cancel stragglers and surplus groups, and count what happened.

The policy (redundancy, tail batching, env ratios, hedging) is described in
:mod:`rockroll.agentrl.rollout.scheduler`, whose :class:`~rockroll.agentrl.rollout.scheduler.RolloutScheduler`
makes one :class:`BatchRun` per batch and turns its outcome into a ``RolloutBatch``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from rockroll.agentrl.rewards.pool import reward_metrics
from rockroll.agentrl.rollout.config import SchedulerConfig
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
from rockroll.agentrl.rollout.env_mix import RatioStream
from rockroll.agentrl.rollout.hedging import Hedger
from rockroll.agentrl.trajectory import Trajectory

__all__ = ["BatchRun", "Group", "episode_metrics", "sample_seed"]

HEDGE_POLL_S = 0.05  # how often running episodes are checked for stalls

Task = asyncio.Task[Trajectory]


@dataclass
class Group:
    """One env group of a batch: ``size`` episodes of one env on one seed (plus redundant ones)."""

    gid: str
    env_id: str
    seed: int
    size: int
    launched: int = 0  # launch order within the batch
    entry: int = 0  # index into the config's env_ids
    batch: int = 0  # the batch that launched it
    carried: int = 0  # batches it has been carried into
    tasks: set[Task] = field(default_factory=set)
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


class BatchRun:
    """The state of batch ``index`` while it plays (see the module docstring).

    ``finished`` is the scheduler's queue that every episode task reports to when it ends (carried
    tasks of the last batch too). Complete groups beyond their env's quota that may be carried land
    in :attr:`banked`, for the next batch.
    """

    def __init__(
        self,
        config: SchedulerConfig,
        manager: EnvManager,
        hedger: Hedger | None,
        index: int,
        finished: asyncio.Queue[Task],
        stream: RatioStream | None,
    ) -> None:
        cfg = self.cfg = config
        self.manager, self.hedger, self.index, self.finished = manager, hedger, index, finished
        self.rng = np.random.default_rng([cfg.seed, index])
        self.sem = asyncio.Semaphore(cfg.max_concurrent_episodes) if cfg.max_concurrent_episodes else None
        self.carry = cfg.tail == "carry"
        self.pending: dict[Task, Group] = {}
        self.complete: list[Group] = []
        self.banked: list[Group] = []
        self.masked: list[Trajectory] = []
        self.cancelled: list[Task] = []
        self.stats: Counter[str] = Counter()
        self.delivered_by: Counter[int] = Counter()
        self.complete_at: list[float] = []
        self.started = time.monotonic()
        self._failures_before = manager.failures.copy()
        self._busy_before = manager.busy.copy()
        self._rewards_before = manager.reward_counts()
        self._rounds_before = getattr(manager, "rounds", 0)  # lock-step rounds played (LockstepEnvManager)
        # env entry of each group launched at the start (ratio mode: this batch's slots, then the extra groups')
        self.quota: Counter[int] | None = None
        if stream is not None:
            self.first = stream.slots(index * cfg.num_env_groups, cfg.num_env_groups)
            self.quota = Counter(self.first)
            self.first += stream.peek(cfg.extra_groups)
        else:
            self.first = [n % len(cfg.env_ids) for n in range(cfg.num_env_groups + cfg.extra_groups)]

    # ------------------------------------------------------------ playing
    async def play(self, tail: list[Group]) -> dict[Task, Group]:
        """Play until ``num_env_groups`` groups are complete (or nothing runs); ``tail``: the groups
        carried or banked from the last batch, already in :attr:`pending`. Returns the episodes that
        play on into the next batch (carry mode), else cancels them."""
        settled = False
        watcher = asyncio.create_task(self._hedge_stalled(self.hedger)) if self.hedger is not None else None
        try:
            for g in tail:
                if g.entry in self.first:
                    self.first.remove(g.entry)  # a carried group takes the place of a new one of its env
                if len(g.done) == g.size:  # banked: complete already
                    self._accept(g)
            for entry in self.first:
                self._launch(entry)
            while len(self.complete) < self.cfg.num_env_groups and self.pending:
                task = await self.finished.get()  # episodes report in the order they end
                self._settle(task)
            settled = True
        finally:
            carried = await self._wind_down(watcher, settled)
        return carried

    async def _episode(self, spec: EpisodeSpec) -> Trajectory:
        if self.sem is None:
            return await self.manager.run(spec)
        async with self.sem:
            return await self.manager.run(spec)

    def _start(self, g: Group, spec: EpisodeSpec, name: str) -> Task:
        task = asyncio.create_task(self._episode(spec), name=name)
        task.add_done_callback(self.finished.put_nowait)
        g.tasks.add(task)
        self.pending[task] = g
        return task

    def _launch(self, entry: int | None = None) -> None:
        cfg, stats = self.cfg, self.stats
        n = stats["groups_launched"]
        entry = n % len(cfg.env_ids) if entry is None else entry
        env_id = cfg.env_ids[entry]
        seed = int(self.rng.integers(0, cfg.max_env_seed))
        g = Group(f"b{self.index}-g{n}", env_id, seed, cfg.group_size, n, entry, batch=self.index)
        tag, kwargs = cfg.tag(entry), cfg.kwargs(entry)
        for i in range(cfg.group_size + cfg.group_size_redundancy):
            spec = EpisodeSpec(env_id, g.seed, g.gid, f"{g.gid}/{i}", dict(kwargs), tag)
            spec.sample_seed = sample_seed(cfg.seed, self.index, n, i)
            spec.deadline = time.monotonic() + cfg.episode.episode_timeout_s  # queueing for a slot counts
            task = self._start(g, spec, spec.episode_id)
            if self.hedger is not None:
                self.hedger.track(task, spec)
        stats["groups_launched"] += 1
        stats["episodes_started"] += len(g.tasks)

    def _cancel(self, g: Group) -> None:
        tasks = [t for t in g.tasks if t in self.pending]
        for t in tasks:
            self.pending.pop(t)
            t.cancel()
            if self.hedger is not None:
                self.hedger.forget(t)
        self.stats["episodes_cancelled"] += len(tasks)
        self.cancelled += tasks

    async def _hedge_stalled(self, hedger: Hedger) -> None:
        """Start a copy of each stalled episode (within the budget); see :mod:`rockroll.agentrl.rollout.hedging`."""
        stats = self.stats
        while True:
            await asyncio.sleep(HEDGE_POLL_S)
            for task, spec in hedger.due(self.pending, time.monotonic()):
                if stats["hedges"] >= hedger.budget(stats["episodes_started"]):
                    break
                copy = self._start(self.pending[task], spec, f"{spec.episode_id}/hedge")
                hedger.pair(task, copy, spec)
                stats["hedges"] += 1

    def _accept(self, g: Group) -> bool:
        """Deliver complete group ``g`` if its env's quota allows (carry mode: else bank it)."""
        if self.quota is not None and self.delivered_by[g.entry] >= self.quota[g.entry]:
            if self.carry and g.carried < self.cfg.max_carry_batches:
                self.banked.append(g)
            return False
        self.complete.append(g)
        self.complete_at.append(time.monotonic() - self.started)
        self.delivered_by[g.entry] += 1
        self.stats["carried_delivered"] += g.batch != self.index
        return True

    def _settle(self, task: Task) -> None:
        """Count one finished episode into its group; deliver, replace or cancel groups as they settle."""
        cfg, stats, quota = self.cfg, self.stats, self.quota
        g = self.pending.pop(task, None)
        if g is None:  # cancelled before: its group is settled
            return
        traj = task.result()  # only FatalRolloutError propagates
        stats["infra_retries"] += traj.infra_retries
        if self.hedger is not None and not self._settle_hedge(self.hedger, task, traj):
            return
        if traj.masked:
            g.masked.append(traj)
            self.masked.append(traj)
        else:
            g.done.append(traj)
        if len(g.done) == g.size and len(self.complete) < cfg.num_env_groups:
            self._cancel(g)
            if not self._accept(g):
                return  # beyond its env's quota: surplus, like a straggler (carry mode: banked)
            if not self.carry and quota is not None and self.delivered_by[g.entry] >= quota[g.entry]:
                for other in {id(o): o for o in self.pending.values() if o.entry == g.entry}.values():
                    self._cancel(other)  # the env's quota is met: its other groups are surplus
        elif len(g.masked) > cfg.group_size_redundancy and len(g.done) < g.size:
            stats["groups_failed"] += 1
            self._cancel(g)
            wanted = quota is None or self.delivered_by[g.entry] < quota[g.entry]
            if wanted and stats["groups_launched"] < cfg.group_launch_limit:
                self._launch(None if quota is None else g.entry)  # ratio mode: the same env, the mix holds

    def _settle_hedge(self, hedger: Hedger, task: Task, traj: Trajectory) -> bool:
        """Settle a hedged pair: False when ``traj`` (a masked copy) does not count, the other plays on."""
        counts, loser = hedger.settle(task, traj, self.pending)
        if not counts:
            self.stats["hedge_copies_masked"] += 1
            return False
        if loser is not None:
            self.pending.pop(loser)
            loser.cancel()
            self.cancelled.append(loser)
            self.stats["episodes_cancelled"] += 1
            self.stats["hedge_wins"] += "/hedge" in task.get_name()
        return True

    async def _wind_down(self, watcher: asyncio.Task[None] | None, settled: bool) -> dict[Task, Group]:
        """Stop hedging; carry the groups still running (carry mode, after a clean run) or cancel them."""
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        carried: dict[Task, Group] = {}
        if self.carry and settled:  # the long tail plays on into the next batch
            carried = dict(self.pending)
            self.stats["groups_carried_out"] += len({id(g) for g in self.pending.values()})
        else:
            for g in {id(g): g for g in self.pending.values()}.values():
                self._cancel(g)
        if self.cancelled:
            await asyncio.gather(*self.cancelled, return_exceptions=True)
        return carried

    # ------------------------------------------------------------ outcome
    def delivered(self) -> tuple[list[Group], list[list[Trajectory]]]:
        """The delivered groups in launch order (not finishing order: in lock-step mode the same seed
        gives the same batch) and each one's ``size`` trajectories."""
        ordered = sorted(self.complete[: self.cfg.num_env_groups], key=lambda g: (g.batch, g.launched))
        return ordered, [sorted(g.done, key=_episode_index)[: g.size] for g in ordered]

    def metrics(self, ordered: list[Group], groups: list[list[Trajectory]]) -> dict[str, float]:
        """``rollout/...``, ``time/...`` and ``env/<tag>/...`` numbers of the batch."""
        cfg, manager = self.cfg, self.manager
        elapsed = time.monotonic() - self.started
        delivered = [t for g in groups for t in g]
        self.stats.update({f"infra_failures/{k}": v for k, v in (manager.failures - self._failures_before).items()})
        metrics: dict[str, float] = {f"rollout/{k}": float(v) for k, v in self.stats.items()}
        busy = manager.busy - self._busy_before
        if busy["generation"] + busy["env"] > 0:  # how the rollout's time splits between the engine and the envs
            metrics["time/generation_share"] = busy["generation"] / (busy["generation"] + busy["env"])
        if busy["reward"] > 0:  # rewards run in a pool of their own, overlapping generation and env steps
            metrics["time/reward_share"] = busy["reward"] / (busy["generation"] + busy["env"] + busy["reward"])
        metrics.update(reward_metrics(manager.reward_counts() - self._rewards_before))
        if hasattr(manager, "rounds"):  # lock-step: the rounds its turns took (a timing: resets join as they end)
            metrics["time/lockstep_rounds"] = float(manager.rounds - self._rounds_before)
        metrics.update(
            {
                "rollout/groups_delivered": float(len(groups)),
                "rollout/groups_short": float(cfg.num_env_groups - len(groups)),
                "rollout/episodes_delivered": float(len(delivered)),
                "rollout/episodes_masked": float(len(self.masked)),
                "rollout/agent_failures": float(sum(t.failure is not None for t in delivered)),
                "rollout/episodes_per_s": len(delivered) / elapsed if elapsed > 0 else 0.0,
                "time/rollout_s": elapsed,
            }
        )
        if self.complete_at and elapsed > 0:  # the long tail: the wait for the last fifth of the groups
            k = max(0, math.ceil(0.8 * cfg.num_env_groups) - 1)
            metrics["time/tail_share"] = (elapsed - self.complete_at[min(k, len(self.complete_at) - 1)]) / elapsed
        metrics.update(episode_metrics(delivered))
        if len(cfg.env_ids) > 1:
            for entry in range(len(cfg.env_ids)):
                metrics[f"env/{cfg.tag(entry)}/groups"] = float(sum(g.entry == entry for g in ordered))
        return metrics
