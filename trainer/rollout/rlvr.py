"""Single-turn RLVR behind the trainer's rollout boundary (``rollout.mode: rlvr``): :class:`RLVRRollout`.

Each step draws training rows of ``rollout.rlvr.dataset`` (:mod:`rockroll.trainer.rollout.rlvr_data`), asks
the engine for ``group_size`` (+ ``group_size_redundancy``) answers to each (batched calls of
``rollout.rlvr.overlap_chunks`` runs of whole groups: a run is scored while the next generates; 1: one call,
then every score) with the :class:`~rockroll.agentrl.rewards.router.RewardRouter` of ``rollout.rlvr.rewards`` (the row's
tag picks the reward) and refills the batch until it holds ``num_env_groups`` groups with a signal
(:mod:`rockroll.trainer.rollout.rlvr_sampling`). The losses and advantage estimators are the trainer's,
unchanged: an answer is a one-turn :class:`~rockroll.agentrl.trajectory.Trajectory` whose reward is its score.

Failures: a generation that fails is retried (``rollout.episode.max_retries``), then its answers are
masked; a reward that fails (raises, times out, returns no number) masks its answer, never scores it 0.
Masked answers are never trained on, and counted (``rollout/answers_masked``, ``reward/<tag>/infra_failures``).

Evaluation is greedy, one answer per held-out row: ``<prefix>/<tag>/success`` (reward >=
``success_threshold``), ``.../reward``, ``.../n`` and ``.../masked``. The trainer's evaluation seeds index
the held-out rows: ``eval_episodes`` rows from the first, then ``select_episodes`` validation rows after them.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
from rockroll.agentrl.errors import InfraFailure, boundary
from rockroll.agentrl.rewards.router import RewardOutcome, RewardRouter, route_metrics
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.trajectory import FailureTag, TrainSample, Trajectory, Turn
from rockroll.envs.config import ConfigError
from rockroll.sandbox.retry import Backoff
from rockroll.trainer.evaluation.selection import SELECT_SEED_GAP
from rockroll.trainer.rollout.base import Rollout
from rockroll.trainer.rollout.engine_sync import EngineSync
from rockroll.trainer.rollout.rlvr_data import PromptIds, load_rows, render
from rockroll.trainer.rollout.rlvr_sampling import SamplingPlan, fill_batch, overlong

if TYPE_CHECKING:
    from rockroll.agentrl.rewards.samples import Sample
    from rockroll.trainer.config import TrainConfig

__all__ = ["RLVRRollout", "TagEntry"]


@dataclass(frozen=True)
class TagEntry:
    """One reward tag of the run, as the run report lists an env: tag, where its rows come from, its share."""

    tag: str
    env_id: str
    ratio: float


@dataclass(frozen=True)
class _Task:
    sample: Sample
    row: int
    group_id: str
    episode_id: str


def _eval_span(cfg: TrainConfig, heldout: int) -> None:
    r = cfg.rollout
    wanted = r.eval_episodes + r.select_episodes
    if wanted > heldout:
        raise ConfigError(
            "rollout.eval_episodes",
            f"rollout.eval_episodes ({r.eval_episodes}) + rollout.select_episodes ({r.select_episodes}) held-out "
            f"rows asked, but the dataset holds {heldout}: lower them, or give the dataset more held-out rows "
            "(rollout.rlvr.dataset.heldout_size, heldout_frac or heldout_path)",
            value=r.eval_episodes,
        )


class RLVRRollout(Rollout):
    """Training batches and greedy held-out evaluation of single-turn RLVR (see the module docstring).

    ``router``: the rewards (default: one built from ``rollout.rlvr.rewards``, closed by :meth:`close`).
    ``owns_engine``: :meth:`close` closes the engine too (False: a shared engine, closed by its owner).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        tokenizer: Any,
        engine: Any,
        *,
        sync: EngineSync | None = None,
        router: RewardRouter | None = None,
        owns_engine: bool = True,
    ) -> None:
        r = cfg.rollout
        self.cfg, self.rl, self.tok, self.engine = cfg, r.rlvr, tokenizer, engine
        self._owns_engine = owns_engine
        self.sync = sync or EngineSync(engine)
        d = self.rl.dataset
        self.source = f"rlvr:{d.generator}" if d.source == "generator" else f"rlvr:{d.path}"
        self.router = router or RewardRouter(self.rl.rewards)
        try:
            self.train, self.heldout = load_rows(self.rl.dataset, self.router.required_fields)
            _eval_span(cfg, len(self.heldout))
            self.tags = self._tags()
            if cfg.sft.steps > 0:  # a warm start without its answers fails now, not after the first evaluation
                self._demo_texts(cfg.sft.num_demos)
        except BaseException:
            self.router.close()
            raise
        self.prompt_ids = PromptIds(tokenizer, d)
        self.plan = SamplingPlan(
            r.scheduler.num_env_groups, r.scheduler.group_size, oversample=self.rl.oversample,
            max_tries=self.rl.max_sampling_tries, dynamic=cfg.algo.dynamic_sampling,
            filter_overlong=self.rl.overlong == "filter",
        )  # fmt: skip
        self._outcomes: list[RewardOutcome] = []
        self._loop = asyncio.new_event_loop()  # one loop for every draw: clients bound to it (a judge's) live on

    def _tags(self) -> list[str]:
        """The run's tags in the router's order; each evaluated tag needs held-out rows among the evaluated."""
        evaluated = {s.tag for s in self.heldout[: self.cfg.rollout.eval_episodes]}
        present = {s.tag for s in self.train} | evaluated
        tags = [t for t in self.router.tags if t in present]
        unseen = [t for t in tags if t not in evaluated]
        if self.cfg.rollout.eval_episodes and unseen:
            raise ConfigError(
                "rollout.eval_episodes",
                f"rollout.eval_episodes: the first {self.cfg.rollout.eval_episodes} held-out rows hold no row of tag "
                f"{unseen[0]!r}; raise rollout.eval_episodes or give that tag held-out rows",
            )
        return tags

    # ------------------------------------------------------------------ answers
    async def _generate(self, reqs: list[GenerationRequest]) -> tuple[list[Any] | None, FailureTag | None, int]:
        """The responses of one batched call, retried on infra failures; ``(None, tag, retries)`` when all failed."""
        ep: EpisodeConfig = self.cfg.rollout.episode
        failure: FailureTag | None = None
        async for attempt in Backoff(attempts=ep.max_retries + 1, timeout_s=ep.episode_timeout_s):
            try:
                return (
                    await boundary("generation", self.engine.generate_batch(reqs), ep.generation_timeout_s),
                    None,
                    attempt,
                )
            except InfraFailure as f:
                failure = FailureTag("infra", f.stage, f.error, f.message, retries=attempt)
        return None, failure, failure.retries if failure is not None else 0

    def _trajectory(
        self, task: _Task, prompt: list[int], res: Any, text: str, out: RewardOutcome, retries: int
    ) -> Trajectory:
        score = out.score
        cut = res.finish_reason == "length"
        if cut and self.rl.overlong == "penalty":
            score -= self.rl.overlong_penalty
        failure = FailureTag("infra", "reward", "RewardInfraFailure", out.error) if out.infra else None
        turn = Turn(prompt, list(res.token_ids), list(res.logprobs), res.weight_version, action_text=text,
                    reward=score, finish_reason=res.finish_reason)  # fmt: skip
        return Trajectory(
            task.episode_id, task.group_id, self.source, task.row, env_tag=task.sample.tag, turns=[turn],
            final_reward=score, success=not out.infra and out.score >= self.rl.success_threshold - 1e-9,
            terminated=failure is None, truncated=cut, failure=failure, infra_retries=retries + out.attempts - 1,
        )  # fmt: skip

    async def _answers(self, tasks: list[_Task], *, temperature: float, seed: int) -> list[Trajectory]:
        """One answer per task (``overlap_chunks`` batched generations of whole groups, each scored while the next
        generates), scored; masked ones included (``traj.masked``)."""
        ep: EpisodeConfig = self.cfg.rollout.episode
        reqs = [
            GenerationRequest(
                self.prompt_ids(t.sample),
                SamplingParams(
                    max_new_tokens=ep.max_tokens_per_turn,
                    temperature=temperature,
                    top_p=ep.top_p,
                    seed=seed * 100_003 + i,
                ),
                request_id=t.episode_id,
            )  # fmt: skip
            for i, t in enumerate(tasks)
        ]
        b = self.cfg.rollout.scheduler
        chunks = _chunks(len(tasks), self.rl.overlap_chunks, b.group_size + b.group_size_redundancy)
        scoring: list[asyncio.Task[list[Trajectory]]] = []
        for lo, hi in chunks:  # a chunk is scored while the next one generates
            results, failure, retries = await self._generate(reqs[lo:hi])
            scoring.append(asyncio.ensure_future(self._scored(tasks[lo:hi], reqs[lo:hi], results, failure, retries)))
        return [t for part in await asyncio.gather(*scoring) for t in part]

    async def _scored(
        self, tasks: list[_Task], reqs: list[GenerationRequest], results: list[Any] | None,
        failure: FailureTag | None, retries: int,
    ) -> list[Trajectory]:  # fmt: skip
        """The trajectories of one generated chunk, scored (all masked when its generation failed every try)."""
        if results is None:
            return [self._masked(t, failure, retries) for t in tasks]
        texts = [self.tok.decode(r.token_ids, skip_special_tokens=True) for r in results]
        outcomes = await self.router.score_batch([t.sample for t in tasks], texts)
        self._outcomes += outcomes
        return [
            self._trajectory(t, q.prompt_ids, r, x, o, retries)
            for t, q, r, x, o in zip(tasks, reqs, results, texts, outcomes, strict=True)
        ]

    def _masked(self, task: _Task, failure: FailureTag | None, retries: int) -> Trajectory:
        """The answer of a generation that failed every try (masked, never trained on)."""
        return Trajectory(task.episode_id, task.group_id, self.source, task.row, env_tag=task.sample.tag,
                          failure=failure, infra_retries=retries)  # fmt: skip

    # ------------------------------------------------------------------ the trainer's calls
    def _draw(self, step: int, rng: random.Random, attempt: int, groups: int) -> list[list[Trajectory]]:
        b = self.cfg.rollout.scheduler
        n = len(self.train)
        rows = rng.sample(range(n), groups) if groups <= n else [rng.randrange(n) for _ in range(groups)]
        size = b.group_size + b.group_size_redundancy
        tasks = [
            _Task(self.train[row], row, f"s{step}t{attempt}g{g}", f"s{step}t{attempt}g{g}e{i}")
            for g, row in enumerate(rows)
            for i in range(size)
        ]
        ep: EpisodeConfig = self.cfg.rollout.episode
        seed = (self.cfg.seed * 7919 + step) * 64 + attempt
        trajs = self._loop.run_until_complete(self._answers(tasks, temperature=ep.temperature, seed=seed))
        return [trajs[g * size : (g + 1) * size] for g in range(len(rows))]

    def next_batch(self, step: int) -> tuple[list[Trajectory], dict[str, float]]:
        """``num_env_groups`` groups of ``group_size`` scored answers (fewer when the tries ran out)."""
        rng = random.Random(self.cfg.seed * 1_000_003 + step)  # a resumed run draws the same rows
        self._outcomes = []
        trajs, metrics = fill_batch(lambda attempt, groups: self._draw(step, rng, attempt, groups), self.plan)
        metrics.update(route_metrics(self._outcomes))
        metrics["rollout/engine_restarts"] = self.sync.new_restarts()
        return trajs, metrics

    def _heldout_row(self, seed: int) -> int:
        r = self.cfg.rollout
        select_start = r.eval_seed_offset + max(r.eval_episodes, SELECT_SEED_GAP)
        row = seed - r.eval_seed_offset if seed < select_start else r.eval_episodes + seed - select_start
        if not 0 <= row < len(self.heldout):
            raise ValueError(f"seed {seed} names held-out row {row}; the dataset holds {len(self.heldout)}")
        return row

    def evaluate(self, seeds: list[int], prefix: str = "eval") -> dict[str, float]:
        """Greedy answers to the held-out rows ``seeds`` name (see the module docstring)."""
        rows = [self._heldout_row(s) for s in seeds]
        tasks = [_Task(self.heldout[row], row, f"{prefix}{row}", f"{prefix}{row}") for row in rows]
        trajs = self._loop.run_until_complete(self._answers(tasks, temperature=0.0, seed=0))
        out: dict[str, float] = {}
        for tag in self.tags:
            mine = [t for t in trajs if t.env_tag == tag]
            scored = [t for t in mine if not t.masked]
            n = max(len(scored), 1)
            out[f"{prefix}/{tag}/success"] = sum(t.success for t in scored) / n
            out[f"{prefix}/{tag}/reward"] = sum(t.final_reward for t in scored) / n
            out[f"{prefix}/{tag}/overlong"] = sum(overlong(t) for t in scored) / n
            out[f"{prefix}/{tag}/n"] = float(len(mine))
            if len(scored) < len(mine):
                out[f"{prefix}/{tag}/masked"] = float(len(mine) - len(scored))
        return out

    def _demo_texts(self, count: int) -> list[str]:
        """The warm start's answers of the first ``count`` training rows; a row without what the template names
        raises :class:`~rockroll.agentrl.rewards.errors.DatasetRowError` naming it."""
        fmt = self.rl.dataset.demo_format()
        if not fmt:
            raise ConfigError(
                "rollout.rlvr.dataset.demo_template",
                "sft.steps > 0 needs rollout.rlvr.dataset.demo_template, the answer built from a row's fields "
                "(e.g. '\\boxed{{{answer}}}'), or set sft.steps: 0",
            )
        where = f"{self.source} (train, warm start)"
        return [render(fmt, s, source=where, index=i) for i, s in enumerate(self.train[:count])]

    def demos(self, count: int) -> list[TrainSample]:
        """Warm-start rows: the first ``count`` training rows with ``dataset.demo_template``'s answer (+ EOS)."""
        out = []
        for i, (sample, text) in enumerate(zip(self.train, self._demo_texts(count), strict=False)):
            prompt = self.prompt_ids(sample)
            resp = list(self.tok.encode(text, add_special_tokens=False)) + [self.tok.eos_token_id]
            ids, mask = prompt + resp, [0] * len(prompt) + [1] * len(resp)
            out.append(TrainSample(ids, mask, [0.0] * len(ids), 0.0, f"demo{i}", f"demo{i}", 0))
        return out

    def report_envs(self) -> list[TagEntry]:
        """The run's tags as the run report lists envs (share: the tag's share of training rows)."""
        counts = Counter(s.tag for s in self.train)
        return [TagEntry(tag, self.source, counts[tag] / max(len(self.train), 1)) for tag in self.tags]

    def release(self) -> None:
        self.sync.release()

    def update_weights(self, weights: Any, version: int) -> dict[str, float]:
        return self.sync.push(weights, version)

    def close(self) -> None:
        try:
            self.router.close()  # a judge's HTTP client closes on this loop, still open
        finally:
            try:
                if self._owns_engine:
                    self._loop.run_until_complete(self.engine.close())
            finally:
                self._loop.close()


def _chunks(n: int, parts: int, group: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` bounds splitting ``n`` answers into at most ``parts`` runs of whole groups of ``group``."""
    groups = max(1, -(-n // max(group, 1)))
    per = -(-groups // max(1, min(parts, groups))) * max(group, 1)
    return [(lo, min(n, lo + per)) for lo in range(0, n, per)] or [(0, 0)]
