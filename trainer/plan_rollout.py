"""Single-turn "whole plan" rollout: the model answers once with every move, the env plays them.

This is the cheap rollout the learning experiments use (one generation per episode instead of
one per move, see TRAINING-NOTES). Scoring is strict: the answer must parse, hold at most
``max_actions`` moves, every move must be valid *and* change the state (no bumping into walls),
and the episode must end in success exactly on the last move. Anything else scores 0.

Envs come from an :class:`rockroll.agentrl.env_source.EnvSource` (in-process, or sandbox sessions), so
the same code runs through real sandboxes. Expert plans (for SFT demos and for the path-length
breakdown of success) are computed on a local copy of the env with the same seed.
"""

from __future__ import annotations

import asyncio
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import rockroll.envhub as envhub
from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
from rockroll.agentrl.env_source import LocalSource
from rockroll.agentrl.trajectory import Trajectory, Turn
from rockroll.envs.core import TextEnvProtocol, parse_answer
from rockroll.envs.experts import expert_for

__all__ = ["PlanTask", "PlanRollout", "expert_plan", "score_plan"]

_SPLIT = re.compile(r"[\s,]+")


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


class PlanRollout:
    """Prompts, demonstrations and scored episodes for one env in plan mode.

    Args:
        env_id, env_kwargs: the env (``envhub`` id and kwargs).
        tokenizer: HF tokenizer with a chat template.
        source: where envs come from (default: in-process ``LocalSource``).
        prompt_style: ``short`` (the observation only), ``grid`` (the observation with its cells
            spaced apart, one token per cell) or ``env`` (the env's system prompt too).
        max_actions: longest plan that is played.
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
    ) -> None:
        self.env_id, self.env_kwargs, self.tok = env_id, dict(env_kwargs), tokenizer
        self.source = source or LocalSource()
        self.prompt_style, self.max_actions = prompt_style, max_actions
        self.tag = env_id.split("-")[0]
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
    def _play(self, seed: int, text: str) -> tuple[float, bool]:
        env = self.source.open(self.env_id, self.env_kwargs)
        try:
            env.reset(seed=seed)
            reward, success, _ = score_plan(env, text, self.max_actions)
            return reward, success
        finally:
            self.source.close(env)

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
        """Generate one plan per task (batched by the engine), play them, return :class:`Trajectory` objects."""
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
        results = await engine.generate_batch(reqs)
        texts = [self.tok.decode(r.token_ids, skip_special_tokens=True) for r in results]
        loop = asyncio.get_running_loop()
        scores = await asyncio.gather(
            *(loop.run_in_executor(self._pool, self._play, t.seed, x) for t, x in zip(tasks, texts, strict=True))
        )
        trajs = []
        for t, req, res, text, (reward, success) in zip(tasks, reqs, results, texts, scores, strict=True):
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
                    terminated=True,
                )
            )
        return trajs

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._local is not None:
            self._local.close()
