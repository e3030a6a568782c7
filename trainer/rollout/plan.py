"""Single-turn "whole plan" rollout: the model answers once with every move, the env plays them.

This is the cheap rollout the learning experiments use (one generation per episode instead of
one per move, see configs/README.md). Scoring is strict: the answer must parse, hold at most
``max_actions`` moves, every move must be valid *and* change the state (no bumping into walls),
and the episode must end in success exactly on the last move. Anything else scores 0.

Envs come from an :class:`rockroll.agentrl.sources.kinds.EnvSource` (in-process, or sandbox sessions), so
the same code runs through real sandboxes. Expert plans (for SFT demos and for the path-length
breakdown of success) are computed on a local copy of the env with the same seed.

The error model is the multi-turn rollout's (:mod:`rockroll.agentrl.errors`, settings of
:class:`~rockroll.agentrl.rollout.config.EpisodeConfig`): the batched generation and each episode's stages
(``sandbox_start``, ``env_reset``, ``env_step``) run under timeouts and a per-episode deadline; an
infra failure (an env that raises or hangs, a sandbox that dies, an engine error) replays the plan on
a fresh env (the env is deterministic per seed, so the score is the one the plan earns) up to
``max_retries`` times, then the episode comes back masked: never scored, never trained on, counted.
Config errors (:class:`~rockroll.agentrl.errors.FatalRolloutError`) are raised at once.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field

import rockroll.envhub as envhub
from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
from rockroll.agentrl.errors import InfraFailure, boundary
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.sources.kinds import LocalSource
from rockroll.agentrl.trajectory import FailureTag, Trajectory, Turn
from rockroll.envs.config import ConfigModel
from rockroll.envs.core import TextEnvProtocol, parse_answer
from rockroll.envs.experts import expert_for
from rockroll.sandbox.retry import Backoff

__all__ = ["PlanConfig", "PlanTask", "PlanRollout", "expert_plan", "plan_batch", "score_plan"]

_SPLIT = re.compile(r"[\s,]+")


class PlanConfig(ConfigModel):
    """The plan rollout's own settings (``rollout.plan``); the keyword arguments of :class:`PlanRollout` of
    the same names. Sampling, response length and limits are the episode's (``rollout.episode``)."""

    prompt_style: Literal["short", "grid", "env"] = Field(
        "short",
        description="short: observation + one instruction line; grid: the same with map cells spaced apart (one "
        "token per cell, best for tiny models); env: the env's own system prompt too",
    )
    max_actions: int = Field(8, ge=1, description="actions of a plan that are executed (more is a failure)")


@dataclass
class PlanTask:
    """One episode to play: which seed, which group it belongs to."""

    seed: int
    group_id: str
    episode_id: str


@lru_cache(maxsize=100_000)
def _expert_plan_cached(env_id: str, kwargs_json: str, seed: int, max_len: int) -> tuple[str, ...]:
    env = envhub.make(env_id, **json.loads(kwargs_json))
    env.reset(seed=seed)
    expert = expert_for(env)
    plan: list[str] = []
    for _ in range(max_len):
        action = expert()
        if action is None:
            break
        plan.append(action)
        _, _, terminated, truncated, _ = env.step(f"<answer>{action}</answer>")
        if terminated or truncated:
            break
    env.close()
    return tuple(plan)


def expert_plan(env_id: str, kwargs: dict[str, Any], seed: int, max_len: int = 200) -> list[str]:
    """The expert's moves from ``reset(seed=seed)`` to the end of the episode (cached)."""
    return list(_expert_plan_cached(env_id, json.dumps(kwargs, sort_keys=True), seed, max_len))


def score_plan(env: TextEnvProtocol, text: str, max_actions: int) -> tuple[float, bool, int]:
    """Play the plan in ``text`` on a freshly reset ``env``; return ``(reward, success, moves played)``."""
    answer = parse_answer(text)
    if answer is None:
        return 0.0, False, 0
    moves = [m for m in _SPLIT.split(answer) if m]
    if not moves or len(moves) > max_actions:
        return 0.0, False, 0
    for i, move in enumerate(moves):
        _, _, terminated, truncated, info = env.step(f"<answer>{move}</answer>")
        if not info.get("action_is_valid", True) or not info.get("action_is_effective", True):
            return 0.0, False, i + 1
        last = i == len(moves) - 1
        if terminated or truncated:
            ok = bool(info.get("success")) and last
            return (1.0 if ok else 0.0), ok, i + 1
    return 0.0, False, len(moves)


def plan_batch(trajs: list[Trajectory], groups: int, group_size: int) -> tuple[list[Trajectory], dict[str, float]]:
    """The training episodes of a plan-mode batch and its error metrics, as the multi-turn scheduler delivers them.

    ``trajs`` hold ``group_size + redundancy`` episodes per group, ``groups + extra`` groups, in
    launch order. A group delivers its first ``group_size`` unmasked episodes when it has that many;
    the first ``groups`` complete groups are the batch. Metrics: ``rollout/episodes_masked``,
    ``rollout/infra_retries`` (fresh starts), ``rollout/infra_failures`` (failed attempts: retries
    plus masked episodes), ``rollout/groups_failed`` (groups with too many masked episodes),
    ``rollout/groups_short`` (groups missing from the batch).
    """
    by_group: dict[str, list[Trajectory]] = {}
    for t in trajs:
        by_group.setdefault(t.group_id, []).append(t)
    delivered: list[Trajectory] = []
    complete = failed = 0
    for members in by_group.values():
        ok = [t for t in members if not t.masked][:group_size]
        if len(ok) < group_size:
            failed += 1
        elif complete < groups:
            complete += 1
            delivered += ok
    masked = sum(t.masked for t in trajs)
    retries = sum(t.infra_retries for t in trajs)
    return delivered, {
        "rollout/episodes_masked": float(masked),
        "rollout/infra_retries": float(retries),
        "rollout/infra_failures": float(retries + masked),
        "rollout/groups_failed": float(failed),
        "rollout/groups_short": float(groups - complete),
    }


class _Progress:
    """Where an episode's worker thread is (stage and since when): the event loop times each stage out."""

    __slots__ = ("stage", "since", "env")

    def __init__(self) -> None:
        self.stage, self.since, self.env = "sandbox_start", time.monotonic(), None

    def enter(self, stage: str) -> None:
        self.stage, self.since = stage, time.monotonic()


class _Watched:
    """An env whose steps mark the episode's progress (``score_plan`` sees a plain env)."""

    def __init__(self, env: TextEnvProtocol, progress: _Progress) -> None:
        self.env, self.progress = env, progress

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.progress.enter("env_step")
        return self.env.step(action)


class PlanRollout:
    """Prompts, demonstrations and scored episodes for one env in plan mode.

    Args:
        env_id, env_kwargs: the env (``envhub`` id and kwargs).
        tokenizer: HF tokenizer with a chat template.
        source: where envs come from (default: in-process ``LocalSource``).
        prompt_style: ``short`` (the observation only), ``grid`` (the observation with its cells
            spaced apart, one token per cell) or ``env`` (the env's system prompt too).
        max_actions: longest plan that is played.
        tag: metric tag (default: the env id before its version).
        limits: timeouts, episode deadline and retries (the fields of ``EpisodeConfig`` the error
            model reads; default: ``EpisodeConfig()``'s).
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any],
        tokenizer: Any,
        *,
        source: Any = None,
        prompt_style: str = "short",
        max_actions: int = 8,
        env_workers: int = 8,
        tag: str | None = None,
        limits: EpisodeConfig | None = None,
    ) -> None:
        self.env_id, self.env_kwargs, self.tok = env_id, dict(env_kwargs), tokenizer
        self.source = source or LocalSource()
        self.prompt_style, self.max_actions = prompt_style, max_actions
        self.tag = tag or env_id.split("-")[0]
        self.limits = limits or EpisodeConfig()
        self._pool = ThreadPoolExecutor(max_workers=env_workers, thread_name_prefix="plan-env")
        self._prompts: dict[int, list[int]] = {}
        self._local: Any = None

    # ------------------------------------------------------------------ text
    def _local_env(self) -> Any:
        if self._local is None:
            self._local = envhub.make(self.env_id, **self.env_kwargs)
        return self._local

    def prompt_ids(self, seed: int) -> list[int]:
        """Chat-templated prompt ids of the episode with ``seed`` (cached)."""
        if seed not in self._prompts:
            env = self._local_env()
            obs, _ = env.reset(seed=seed)
            if self.prompt_style == "grid":  # one token per cell: BPE would merge runs like "OO" or "__"
                obs = "\n".join(" ".join(line) for line in obs.split("\n"))
            msgs = [{"role": "user", "content": obs + "\nAnswer with all moves."}]
            if self.prompt_style == "env":
                msgs.insert(0, {"role": "system", "content": env.system_prompt()})
            text = self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            self._prompts[seed] = list(self.tok.encode(text, add_special_tokens=False))
        return self._prompts[seed]

    def demo(self, seed: int) -> tuple[list[int], list[int]] | None:
        """``(prompt_ids, response_ids)`` of the expert's plan for ``seed`` (None when too long or absent)."""
        plan = expert_plan(self.env_id, self.env_kwargs, seed)
        if not plan or len(plan) > self.max_actions:
            return None
        resp = self.tok.encode("<answer>" + " ".join(plan) + "</answer>", add_special_tokens=False) + [
            self.tok.eos_token_id
        ]
        return self.prompt_ids(seed), resp

    def path_length(self, seed: int) -> int:
        """Length of the expert's plan (the episode's difficulty)."""
        return len(expert_plan(self.env_id, self.env_kwargs, seed))

    # ------------------------------------------------------------------ episodes
    def _play(self, seed: int, text: str, progress: _Progress) -> tuple[float, bool]:
        """Worker thread: open an env, reset it on ``seed``, score the plan (the env is closed by :meth:`_attempt`)."""
        progress.env = self.source.open(self.env_id, self.env_kwargs)
        progress.enter("env_reset")
        progress.env.reset(seed=seed)
        reward, success, _ = score_plan(_Watched(progress.env, progress), text, self.max_actions)  # type: ignore[arg-type]
        return reward, success

    def _close(self, progress: _Progress) -> None:
        env, progress.env = progress.env, None
        if env is not None:
            try:
                self.source.close(env)
            except Exception:  # noqa: BLE001 - a sandbox that died cannot close its session; the source forgets it
                pass

    async def _attempt(self, seed: int, text: str, deadline: float) -> tuple[float, bool]:
        """One try on a fresh env; each stage under its timeout (and the deadline), failures tagged by stage."""
        lim = self.limits
        progress = _Progress()
        fut = self._pool.submit(self._play, seed, text, progress)
        # the env is closed when the thread is done with it, also after the attempt was given up on
        fut.add_done_callback(lambda _f: self._close(progress))
        waiting = asyncio.wrap_future(fut)
        while True:
            stage, since = progress.stage, progress.since
            limit = lim.start_timeout_s if stage == "sandbox_start" else lim.step_timeout_s
            left = min(since + limit, deadline) - time.monotonic()
            # the thread may enter a stage with a shorter timeout meanwhile: look again at least every quarter of it
            done, _ = await asyncio.wait({waiting}, timeout=max(min(left, lim.step_timeout_s / 4), 0.0))
            if done:
                return await boundary(progress.stage, waiting, None)  # raises InfraFailure / FatalRolloutError
            now = time.monotonic()
            if progress.since != since or (now < since + limit and now < deadline):
                continue  # the thread moved on, or the stage still has time
            fut.cancel()  # not started yet: never runs; running: left to finish in its thread
            if now >= deadline:
                raise InfraFailure(stage, None, "the episode deadline passed")
            raise InfraFailure(stage, TimeoutError(), f"no answer within {limit:.3g}s")

    async def _episode(self, seed: int, text: str) -> tuple[float, bool, FailureTag | None, int]:
        """``(reward, success, failure, retries)`` of one plan: infra failures retried on a fresh env, then masked."""
        deadline = time.monotonic() + self.limits.episode_timeout_s
        failure: FailureTag | None = None
        async for attempt in Backoff(attempts=self.limits.max_retries + 1, deadline=deadline):
            try:
                reward, success = await self._attempt(seed, text, deadline)
                return reward, success, None, attempt
            except InfraFailure as f:
                failure = FailureTag("infra", f.stage, f.error, f.message, retries=attempt)
        return 0.0, False, failure, failure.retries if failure is not None else 0

    async def _generate(
        self, engine: Any, reqs: list[GenerationRequest]
    ) -> tuple[list[Any] | None, FailureTag | None, int]:
        """The batch's responses (one batched call), retried on infra failures (a dead engine included), and the
        retries it took; ``(None, tag, retries)`` when all tries failed."""
        lim = self.limits
        failure: FailureTag | None = None
        async for attempt in Backoff(attempts=lim.max_retries + 1, timeout_s=lim.episode_timeout_s):
            try:
                return (
                    await boundary("generation", engine.generate_batch(reqs), lim.generation_timeout_s),
                    None,
                    attempt,
                )
            except InfraFailure as f:
                failure = FailureTag("infra", f.stage, f.error, f.message, retries=attempt)
        return None, failure, failure.retries if failure is not None else 0

    async def run(
        self,
        engine: Any,
        tasks: list[PlanTask],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float = 1.0,
        sample_seed: int = 0,
    ) -> list[Any]:
        """Generate one plan per task (batched by the engine), play them, return :class:`Trajectory` objects
        (masked ones included: ``traj.masked``, ``traj.failure`` says where it broke)."""
        reqs = [
            GenerationRequest(
                self.prompt_ids(t.seed),
                SamplingParams(
                    max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=sample_seed * 100_003 + i
                ),
                request_id=t.episode_id,
            )
            for i, t in enumerate(tasks)
        ]
        results, gen_failure, gen_retries = await self._generate(engine, reqs)
        if results is None:  # the engine failed every try: the whole batch is masked
            return [
                Trajectory(t.episode_id, t.group_id, self.env_id, t.seed, env_tag=self.tag, failure=gen_failure,
                           infra_retries=gen_failure.retries if gen_failure else 0)
                for t in tasks
            ]  # fmt: skip
        texts = [self.tok.decode(r.token_ids, skip_special_tokens=True) for r in results]
        played = await asyncio.gather(*(self._episode(t.seed, x) for t, x in zip(tasks, texts, strict=True)))
        trajs = []
        for t, req, res, text, (reward, success, failure, retries) in zip(
            tasks, reqs, results, texts, played, strict=True
        ):
            turn = Turn(
                req.prompt_ids,
                list(res.token_ids),
                list(res.logprobs),
                res.weight_version,
                action_text=text,
                reward=reward,
                finish_reason=res.finish_reason,
            )
            trajs.append(
                Trajectory(
                    t.episode_id,
                    t.group_id,
                    self.env_id,
                    t.seed,
                    env_tag=self.tag,
                    turns=[turn],
                    final_reward=reward,
                    success=success,
                    terminated=failure is None,
                    failure=failure,
                    infra_retries=retries + gen_retries,  # a retried generation counts for each episode of it
                )
            )
        return trajs

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._local is not None:
            self._local.close()
