"""Multi-turn rollout for the trainer through agentrl's scheduler and sample buffer.

``rollout.mode: multiturn``: one action per turn, the env answering each turn, whole episodes
played by :class:`rockroll.agentrl.rollout.scheduler.RolloutScheduler` (queue scheduling, sandboxes, failure
boundaries) and buffered by :class:`rockroll.agentrl.rollout.async_rollout.AsyncRollout` (background production,
``async_generation_ratio`` bounding staleness). Those are asyncio objects: they live on an event
loop in a background thread (:class:`LoopThread`) and the synchronous controller calls into it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rockroll.envhub as envhub
from rockroll.agentrl.eval.config import EPISODE_FILE
from rockroll.agentrl.models.chat import PromptBuilder, format_observation
from rockroll.agentrl.rollout.async_rollout import AsyncRollout
from rockroll.agentrl.rollout.config import SchedulerConfig
from rockroll.agentrl.rollout.env_manager import EpisodeSpec
from rockroll.agentrl.rollout.lockstep import make_env_manager
from rockroll.agentrl.rollout.scheduler import RolloutScheduler
from rockroll.agentrl.tools.metrics import tool_metrics
from rockroll.agentrl.trajectory import Trajectory
from rockroll.envs.config import ConfigError
from rockroll.trainer.rollout.base import Rollout
from rockroll.trainer.rollout.engine_sync import EngineSync
from rockroll.trainer.rollout.env_check import env_replica, registered_here
from rockroll.trainer.rollout.forks import ForkEstimator

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig

__all__ = [
    "LoopThread",
    "MultiTurnDriver",
    "check_context",
    "mean_success",
    "scheduler_config",
    "success_metrics",
    "write_episode",
    "env_instructions",
]


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


def success_metrics(
    trajs: list[Trajectory],
    prefix: str,
    tag: str,
    difficulty: Callable[[int], int | None],
    category: Callable[[int], str | None] | None = None,
) -> dict[str, float]:
    """``<prefix>/<tag>/success``, its split by difficulty, ``success_len<k>`` (with ``n_len<k>`` episodes),
    and by the env's category of the episode (ALFWorld: the task type), ``success_cat_<name>`` (with
    ``n_cat_<name>``); also the mean final reward (``reward``: WebShop's score) and turns (``turns``).

    Masked episodes (infra failures after every retry) are left out of every rate and counted in
    ``<prefix>/<tag>/masked`` (present when any).
    """
    masked = sum(t.masked for t in trajs)
    trajs = [t for t in trajs if not t.masked]
    n = max(len(trajs), 1)
    out = {
        f"{prefix}/{tag}/success": sum(t.success for t in trajs) / n,
        f"{prefix}/{tag}/reward": sum(t.final_reward for t in trajs) / n,
        f"{prefix}/{tag}/turns": sum(len(t.turns) for t in trajs) / n,
    }
    if masked:
        out[f"{prefix}/{tag}/masked"] = float(masked)
    splits: list[tuple[str, Callable[[int], Any]]] = [("len", difficulty)]
    if category is not None:
        splits.append(("cat_", category))
    for name, of in splits:
        by: dict[Any, list[bool]] = {}
        for t in trajs:
            k = of(t.seed)
            if k is not None:
                by.setdefault(k, []).append(t.success)
        for k in sorted(by):
            out[f"{prefix}/{tag}/success_{name}{k}"] = sum(by[k]) / len(by[k])
            out[f"{prefix}/{tag}/n_{name}{k}"] = float(len(by[k]))
    return out


def mean_success(metrics: dict[str, float], prefix: str, tags: list[str]) -> float:
    """The success of an evaluation: the env's, or with several envs their unweighted mean (``<prefix>/success``)."""
    if len(tags) == 1:
        return metrics[f"{prefix}/{tags[0]}/success"]
    return sum(metrics[f"{prefix}/{t}/success"] for t in tags) / len(tags)


def scheduler_config(cfg: TrainConfig) -> SchedulerConfig:
    """The agentrl scheduler's config of a multi-turn run: the run's ``rollout.scheduler`` and
    ``rollout.episode`` as they are, plus the env mix, the run's seed and the training seed range.

    One env keeps the scheduler's plain mode (groups cycle through the one env); a mix passes each
    entry's tag, kwargs (keyed by tag) and ratio.
    """
    r = cfg.rollout
    mix = r.env_mix()
    shared = {**dict(r.scheduler), "seed": cfg.seed, "max_env_seed": r.train_seeds or r.eval_seed_offset}
    shared["episode"] = r.episode
    if len(mix) == 1:
        e = mix[0]
        return SchedulerConfig(
            env_ids=[e.env_id], env_kwargs={e.env_id: dict(e.env_kwargs)}, env_tags=[e.tag], **shared
        )
    return SchedulerConfig(
        env_ids=[e.env_id for e in mix],
        env_kwargs={e.tag: dict(e.env_kwargs) for e in mix},
        env_tags=[e.tag for e in mix],
        env_ratios=[e.ratio for e in mix],
        **shared,
    )


def write_episode(model_dir: Path, cfg: TrainConfig, system_text: str | None = None) -> Path:
    """Record beside an exported model how its episodes were played (``rockroll eval --model`` and
    ``serve-model`` read the prompt settings) and on which envs (``envs``: id, kwargs, tag, ratio of each),
    or, for an RLVR run, on which dataset (``rlvr``). ``system_text``: the env instructions the policy saw as
    its system message (``env_instructions``), so a server that cannot make the env applies them too."""
    if cfg.rollout.mode == "rlvr":
        data: dict[str, Any] = {"mode": "rlvr", "rlvr": {"dataset": cfg.rollout.rlvr.dataset.model_dump()}}
        if cfg.rollout.envs:  # agentic envs beside the dataset: their episodes were played as a multiturn run's
            data.update(cfg.rollout.episode.model_dump(), envs=[e.model_dump() for e in cfg.rollout.envs])
    else:
        data = cfg.rollout.episode.model_dump()
        data["envs"] = [e.model_dump() for e in cfg.rollout.env_mix()]
        if system_text:
            data["system_text"] = system_text
    (Path(model_dir) / EPISODE_FILE).write_text(json.dumps(data, indent=2) + "\n")
    return Path(model_dir)


def env_instructions(cfg: TrainConfig, source: Any = None) -> str | None:
    """The system message a multi-turn run's policy sees: its one env's instructions (None with
    ``system_prompt: none``, several envs, or an env that cannot be made here)."""
    mix = cfg.rollout.env_mix()
    if cfg.rollout.mode != "multiturn" or cfg.rollout.episode.system_prompt != "env" or len(mix) != 1:
        return None
    try:
        with env_replica(mix[0].env_id, dict(mix[0].env_kwargs), source) as env:
            env.reset(seed=0)
            return str(env.system_prompt()) or None
    except Exception:  # noqa: BLE001 - the export then lacks the text; serve-model makes the env itself
        return None


def check_context(cfg: TrainConfig, tokenizer: Any, source: Any = None) -> None:
    """Fail before any rollout when a full history window cannot fit ``rollout.episode.max_context_tokens``.

    The window is filled with copies of the first observation and a legal answer, which is what a
    prompt of that many exchanges costs at least. An env not registered here is looked at through
    ``source`` (one session of it).
    """
    limit = cfg.rollout.episode.max_context_tokens
    if limit is None:
        return
    for e in cfg.rollout.env_mix():
        _check_env_context(cfg, tokenizer, e.env_id, e.env_kwargs, limit, source)


def _check_env_context(
    cfg: TrainConfig, tokenizer: Any, env_id: str, env_kwargs: dict[str, Any], limit: int, source: Any = None
) -> None:
    ep = cfg.rollout.episode
    with env_replica(env_id, dict(env_kwargs), source) as env:
        obs, _ = env.reset(seed=0)
        obs = format_observation(obs, ep.observation_format)
        action = f"<answer>{(env.action_candidates() or ['x'])[0]}</answer>"
        window = ep.history_k if ep.history == "last_k" else ep.max_turns - 1
        builder = PromptBuilder(tokenizer, env.system_prompt() if ep.system_prompt == "env" else "", history="last_k")
        msgs = builder._messages([(obs, action)] * window, obs)
        needed = len(tokenizer.encode(builder._render(msgs), add_special_tokens=False)) + ep.max_tokens_per_turn
    if needed > limit:
        shown = f"history_k={ep.history_k}" if ep.history == "last_k" else f"history=full over {ep.max_turns} turns"
        raise ConfigError(
            "rollout.episode.max_context_tokens",
            f"rollout.episode.{shown} needs about {needed} tokens per turn on {env_id} (prompt + "
            f"max_tokens_per_turn) but rollout.episode.max_context_tokens is {limit}: lower history_k "
            "or raise max_context_tokens",
            value=limit,
        )


class MultiTurnDriver(Rollout):
    """Training batches and greedy evaluation from agentrl's scheduler (see the module docstring).

    With several envs (``rollout.envs``) every batch mixes them by ratio, and evaluation plays the
    held-out seeds on each env (``<prefix>/<tag>/...`` per env, ``<prefix>/success`` their mean).
    ``sync``: how weights reach the engine (sleep/wake, restarts); given by
    :func:`rockroll.trainer.rollout.base.make_rollout`, whose driver then owns the engine and closes it
    (``owns_engine``: False leaves a shared engine to its owner).
    """

    def __init__(
        self, cfg: TrainConfig, engine: Any, source: Any, *, sync: EngineSync | None = None,
        owns_engine: bool | None = None,
    ) -> None:  # fmt: skip
        self.cfg, self.engine, self.source = cfg, engine, source
        self.sync = sync or EngineSync(engine)
        self._owns_engine = sync is not None if owns_engine is None else owns_engine
        self.envs = cfg.rollout.env_mix()
        self.tags = [e.tag for e in self.envs]
        self.tag = self.tags[0]
        self.episode = cfg.rollout.episode
        self.sched_cfg = scheduler_config(cfg)
        self._facts: dict[tuple[str, int], tuple[int | None, str | None]] = {}
        self._forks: dict[str, ForkEstimator] = {}
        self.last_eval: list[Trajectory] = []
        self.loop = LoopThread()
        self.producer: AsyncRollout | None = None  # started by the first next_batch (after the warm start)
        self.scheduler: RolloutScheduler | None = None

    def start_at(self, step: int, pending: Any = None) -> None:
        """Make the first batch the scheduler plays batch ``step`` (a resumed run continues its seed stream)."""
        if self.producer is not None:
            raise RuntimeError("start_at must come before the first batch")
        self.sched_cfg = self.sched_cfg.model_copy(update={"first_batch": step})

    async def _start(self) -> AsyncRollout:
        self.scheduler = RolloutScheduler(self.engine, self.source, self.sched_cfg)
        producer = AsyncRollout(self.scheduler)
        producer.start()
        return producer

    def next_batch(self, step: int | None = None) -> tuple[list[Any], dict[str, float]]:
        """The next buffered batch: its trajectories (complete groups) and its rollout metrics, with
        ``rollout/infra_failures`` (every failed attempt, retried or masked, over the scheduler's stages)
        and ``rollout/engine_restarts``."""
        if self.producer is None:
            self.producer = self.loop.run(self._start())
        batch = self.loop.run(self.producer.get_batch())
        metrics = dict(batch.metrics)
        metrics["rollout/infra_failures"] = float(
            sum(v for k, v in metrics.items() if k.startswith("rollout/infra_failures/"))
        )
        metrics["rollout/engine_restarts"] = self.sync.new_restarts()
        return batch.trajectories, metrics

    def release(self) -> None:
        if self.sched_cfg.async_generation_ratio == 0:  # the producer waits for the next request
            self.sync.release()

    def update_weights(self, weights: Any, version: int) -> dict[str, float]:
        """Pause generation, load the weights into the engine, resume (agentrl's protocol); a dead engine
        is restarted and the load tried again (:class:`~rockroll.trainer.rollout.engine_sync.EngineSync`)."""
        return self.sync.push(weights, version, self._load)

    def _load(self, weights: Any, version: int) -> None:
        if self.producer is None:
            self.engine.update_weights(weights, version)
        else:
            self.loop.run(self.producer.update_weights(weights, version))

    def fork_values(self, trajs: list[Trajectory]) -> tuple[dict[str, list[float | None]], dict[str, float]]:
        """Per-turn ``V(s_t)`` of the batch from forked continuations (``algo.turn_credit: fork``), each
        episode forked on its own env."""
        a = self.cfg.algo
        values: dict[str, list[float | None]] = {}
        failures = 0
        for env in self.envs:
            mine = [t for t in trajs if (t.env_tag or self.tag) == env.tag]
            if not mine:
                continue
            forks = self._forks.get(env.tag)
            if forks is None:
                forks = self._forks[env.tag] = ForkEstimator(
                    self.engine, self.source, env.env_id, env.env_kwargs, self.episode,
                    k=a.fork_k, turns=a.fork_turns, gamma=a.step_gamma, seed=self.cfg.seed,
                )  # fmt: skip
            before = forks.failures
            values.update(self.loop.run(forks.values(mine)))
            failures += forks.failures - before
        forked = sum(v is not None for vs in values.values() for v in vs)
        return values, {"rollout/forked_turns": float(forked), "rollout/fork_failures": float(failures)}

    def play(self, seeds: list[int], *, temperature: float = 0.0, env: int | None = None) -> list[Trajectory]:
        """One episode per seed and env (greedy by default; ``env``: that entry of the mix alone), played by
        the same env manager code as training: infra failures are retried, then masked."""
        episode = self.episode.model_copy(update={"temperature": temperature})
        b = self.cfg.rollout.scheduler
        limit = b.max_concurrent_episodes or max(1, b.num_env_groups * b.group_size)
        envs = self.envs if env is None else [self.envs[env]]

        async def run() -> list[Trajectory]:
            manager = make_env_manager(self.engine, self.source, episode, threads=min(256, max(16, limit)))
            sem = asyncio.Semaphore(limit)

            async def one(e: Any, seed: int) -> Trajectory:
                async with sem:
                    gid = f"eval{seed}" if len(self.envs) == 1 else f"eval-{e.tag}-{seed}"
                    spec = EpisodeSpec(e.env_id, seed, gid, gid, dict(e.env_kwargs), e.tag)
                    return await manager.run(spec)

            try:
                return list(await asyncio.gather(*(one(e, s) for e in envs for s in seeds)))
            finally:
                await manager.drain()
                manager.shutdown()

        return self.loop.run(run())

    def evaluate(self, seeds: list[int], prefix: str = "eval") -> dict[str, float]:
        """Greedy success on ``seeds`` per env (``<prefix>/<tag>/success``), split by difficulty
        (``success_len<k>``), and a tool env's call rates (``<prefix>/<tag>/tools/<rate>``); with several envs
        also their mean, ``<prefix>/success``."""
        trajs = self.play(seeds)
        self.last_eval = trajs
        out: dict[str, float] = {}
        for e in self.envs:
            mine = [t for t in trajs if t.env_tag == e.tag]
            out.update(
                success_metrics(
                    mine,
                    prefix,
                    e.tag,
                    lambda seed, e=e: self.difficulty(seed, e.tag),
                    lambda seed, e=e: self.category(seed, e.tag),
                )
            )
            out.update({f"{prefix}/{e.tag}/tools/{k}": v for k, v in tool_metrics(mine).items()})  # tool envs'
        if len(self.envs) > 1:
            out[f"{prefix}/success"] = mean_success(out, prefix, self.tags)
        return out

    def success(self, metrics: dict[str, float], prefix: str) -> float:
        """The one success number of an evaluation (see :func:`mean_success`)."""
        return mean_success(metrics, prefix, self.tags)

    def difficulty(self, seed: int, tag: str | None = None) -> int | None:
        """The env's own difficulty of the episode on ``seed`` (FrozenLake: the no-slip shortest path), if any."""
        return self._episode_facts(seed, tag)[0]

    def category(self, seed: int, tag: str | None = None) -> str | None:
        """The env's own category of the episode on ``seed`` (ALFWorld: its task type), if any."""
        return self._episode_facts(seed, tag)[1]

    def _episode_facts(self, seed: int, tag: str | None) -> tuple[int | None, str | None]:
        e = next(e for e in self.envs if e.tag == (tag or self.tag))
        key = (e.tag, seed)
        if key not in self._facts and not registered_here(e.env_id):  # played through the source only: no facts
            self._facts[key] = (None, None)
        if key not in self._facts:
            env = envhub.make(e.env_id, **e.env_kwargs)
            try:
                env.reset(seed=seed)
                measure = getattr(env.unwrapped, "difficulty", None)
                kind = getattr(env.unwrapped, "category", None)
                self._facts[key] = (
                    int(measure()) if callable(measure) else None,
                    str(kind()) if callable(kind) else None,
                )
            finally:
                env.close()
        return self._facts[key]

    def close(self) -> None:
        async def stop() -> None:
            if self.producer is not None:
                await self.producer.stop()
            if self.scheduler is not None:
                await self.scheduler.close()

        try:
            self.loop.run(stop(), timeout=60)
        finally:
            self.loop.close()
            if self._owns_engine:
                asyncio.run(self.engine.close())
