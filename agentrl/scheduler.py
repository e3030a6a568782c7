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
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from rockroll.agentrl.config import SchedulerConfig
from rockroll.agentrl.engines.base import LLMEngine
from rockroll.agentrl.env_manager import EnvManager, EpisodeSpec, GenerationGate, RewardFn
from rockroll.agentrl.env_source import EnvSource
from rockroll.agentrl.trajectory import TrainSample, Trajectory

__all__ = ["RolloutScheduler", "RolloutBatch", "episode_metrics"]

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
    """

    groups: list[list[Trajectory]]
    masked: list[Trajectory] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    index: int = 0
    layout: Literal["concat", "per_turn"] = "concat"

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
        self.manager = EnvManager(engine, source, config.episode, threads=threads, reward_fn=reward_fn, gate=self.gate)
        self.batches = config.first_batch

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
        finished: asyncio.Queue[asyncio.Task[Trajectory]] = asyncio.Queue()
        started = time.monotonic()
        failures_before = self.manager.failures.copy()

        async def episode(spec: EpisodeSpec) -> Trajectory:
            if sem is None:
                return await self.manager.run(spec)
            async with sem:
                return await self.manager.run(spec)

        def launch() -> None:
            n = stats["groups_launched"]
            env_id = cfg.env_ids[n % len(cfg.env_ids)]
            g = _Group(f"b{index}-g{n}", env_id, int(rng.integers(0, cfg.max_env_seed)), cfg.group_size, n)
            for i in range(cfg.group_size + cfg.group_size_redundancy):
                spec = EpisodeSpec(env_id, g.seed, g.gid, f"{g.gid}/{i}", dict(cfg.env_kwargs.get(env_id, {})), env_id)
                spec.sample_seed = sample_seed(cfg.seed, index, n, i)
                task = asyncio.create_task(episode(spec), name=spec.episode_id)
                task.add_done_callback(finished.put_nowait)
                g.tasks.add(task)
                pending[task] = g
            stats["groups_launched"] += 1
            stats["episodes_started"] += len(g.tasks)

        def cancel(g: _Group) -> list[asyncio.Task[Trajectory]]:
            tasks = [t for t in g.tasks if t in pending]
            for t in tasks:
                pending.pop(t)
                t.cancel()
            stats["episodes_cancelled"] += len(tasks)
            return tasks

        cancelled: list[asyncio.Task[Trajectory]] = []
        try:
            for _ in range(cfg.num_env_groups + cfg.extra_groups):
                launch()
            while len(complete) < cfg.num_env_groups and pending:
                task = await finished.get()  # episodes report in the order they end
                g = pending.pop(task, None)
                if g is None:  # cancelled before: its group is settled
                    continue
                traj = task.result()  # only FatalRolloutError propagates
                stats["infra_retries"] += traj.infra_retries
                if traj.masked:
                    g.masked.append(traj)
                    masked.append(traj)
                else:
                    g.done.append(traj)
                if len(g.done) == g.size and len(complete) < cfg.num_env_groups:
                    complete.append(g)
                    cancelled += cancel(g)
                elif len(g.masked) > cfg.group_size_redundancy and len(g.done) < g.size:
                    stats["groups_failed"] += 1
                    cancelled += cancel(g)
                    if stats["groups_launched"] < cfg.group_launch_limit:
                        launch()
        finally:
            for g in {id(g): g for g in pending.values()}.values():
                cancelled += cancel(g)
            if cancelled:
                await asyncio.gather(*cancelled, return_exceptions=True)
        if len(complete) < cfg.num_env_groups:
            log.warning("batch %d: only %d of %d groups completed", index, len(complete), cfg.num_env_groups)
        elapsed = time.monotonic() - started
        # launch order, not finishing order: in lock-step mode the same seed gives the same batch
        ordered = sorted(complete[: cfg.num_env_groups], key=lambda g: g.launched)
        groups = [sorted(g.done, key=_episode_index)[: g.size] for g in ordered]
        delivered = [t for g in groups for t in g]
        stats.update({f"infra_failures/{k}": v for k, v in (self.manager.failures - failures_before).items()})
        metrics: dict[str, float] = {f"rollout/{k}": float(v) for k, v in stats.items()}
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
        metrics.update(episode_metrics(delivered))
        layout: Literal["concat", "per_turn"] = "concat" if cfg.episode.history == "full" else "per_turn"
        return RolloutBatch(groups, masked, metrics, index, layout)

    async def close(self, timeout_s: float = 30.0) -> bool:
        """Wait for every env to be given back, then stop the thread pool; False if some hung."""
        ok = await self.manager.drain(timeout_s)
        if ok:
            await asyncio.to_thread(self.manager.shutdown)
        return ok

    def __repr__(self) -> str:
        c = self.config
        return f"RolloutScheduler({c.num_env_groups}x{c.group_size}, source={self.source.name})"
