"""Exact validation: the checkpoint is chosen on a score without sampling noise where the env allows one.

200 played greedy episodes on slippery FrozenLake have a standard error of about 3.5 points, more than
RL moves the policy between evaluations, so the best of them is mostly the luckiest. A policy that sees
the current grid alone (``rollout.episode.history: last_k`` with ``history_k: 0``) is a table
``cell -> action`` per map: this asks the engine for its greedy answer at every non-terminal cell of each
validation map (one batched generation, restricted to the env's declared answers when the rollout
restricts them) and scores the table exactly by dynamic programming over the slips
(:func:`rockroll.envs.frozenlake.exact.policy_success`), as ``bench/learning/frozenlake_exact_eval.py`` does for
an exported model. The same maps give the same number for the same policy.

:data:`EXACT_VALIDATORS` maps an env id to a factory ``(cfg, env entry) -> validator | None`` (None: the
settings do not allow an exact score); a validator is ``(rollout, seeds) -> select/<tag>/... metrics``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import rockroll.envhub as envhub
from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
from rockroll.agentrl.models.chat import PromptBuilder, format_observation
from rockroll.agentrl.rollout.answers import answer_trie
from rockroll.envs.core import parse_answer
from rockroll.envs.frozenlake.exact import policy_success
from rockroll.envs.frozenlake.maps import ACTIONS

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig

__all__ = ["EXACT_VALIDATORS", "FrozenLakeExact", "exact_validator"]

Validator = Callable[[Any, list[int]], dict[str, float]]


class FrozenLakeExact:
    """Exact greedy success of the rollout engine's policy on FrozenLake maps (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, env: Any) -> None:
        self.cfg, self.env = cfg, env
        kw = dict(env.env_kwargs)
        self.slippery = bool(kw.get("is_slippery", True))
        limit = envhub.spec(env.env_id).max_steps
        turns = cfg.rollout.episode.max_turns
        self.steps = min(turns, limit) if limit else turns
        self._cells: dict[int, tuple[tuple[str, ...], list[tuple[int, int, str]]]] = {}
        self._prompts: dict[tuple[int, tuple[int, ...]], tuple[list[tuple[int, int, int]], list[list[int]]]] = {}

    def cells(self, seed: int) -> tuple[tuple[str, ...], list[tuple[int, int, str]]]:
        """The map of ``seed`` and the observation at each of its non-terminal cells ``(row, col, obs)``."""
        if seed not in self._cells:
            env = envhub.make(self.env.env_id, **self.env.env_kwargs)
            try:
                env.reset(seed=seed)
                inner = env.unwrapped
                grid = tuple(inner.grid)
                out = []
                for r, line in enumerate(grid):
                    for c, ch in enumerate(line):
                        if ch not in "HG":
                            inner._set_state({"grid": list(grid), "row": r, "col": c})
                            out.append((r, c, inner._render()))
                self._cells[seed] = (grid, out)
            finally:
                env.close()
        return self._cells[seed]

    def system(self) -> str:
        """The system prompt the policy sees (``system_prompt: env``), else empty."""
        if self.cfg.rollout.episode.system_prompt != "env":
            return ""
        probe = envhub.make(self.env.env_id, **self.env.env_kwargs)
        try:
            return str(probe.system_prompt())
        finally:
            probe.close()

    def prompts(self, tok: Any, seeds: list[int]) -> tuple[list[tuple[int, int, int]], list[list[int]]]:
        """``(where, prompts)``: ``(map index, row, col)`` and the policy's prompt at every non-terminal cell
        (kept: validation asks the same maps every time)."""
        key = (id(tok), tuple(seeds))
        if key not in self._prompts:
            self._prompts = {key: self._build_prompts(tok, seeds)}
        return self._prompts[key]

    def _build_prompts(self, tok: Any, seeds: list[int]) -> tuple[list[tuple[int, int, int]], list[list[int]]]:
        ep, system = self.cfg.rollout.episode, self.system()
        where, prompts = [], []
        for m, seed in enumerate(seeds):
            for r, c, obs in self.cells(seed)[1]:
                builder = PromptBuilder(tok, system, history="last_k", last_k=0, max_new_tokens=ep.max_tokens_per_turn)
                prompts.append(builder.first_prompt(format_observation(obs, ep.observation_format)))
                where.append((m, r, c))
        return where, prompts

    def __call__(self, rollout: Any, seeds: list[int], prefix: str = "select") -> dict[str, float]:
        """Score the rollout engine's greedy policy (one batched generation through the engine)."""
        ep, engine = self.cfg.rollout.episode, rollout.engine
        tok = engine.tokenizer
        trie = answer_trie(engine, self.env.env_id, restrict=ep.restrict_answers)
        params = SamplingParams(max_new_tokens=ep.max_tokens_per_turn, temperature=0.0, seed=0, allowed=trie)
        where, prompts = self.prompts(tok, seeds)
        results = rollout.loop.run(engine.generate_batch([GenerationRequest(p, params) for p in prompts]))
        answers = [tok.decode(res.token_ids, skip_special_tokens=True) for res in results]
        return self.score(seeds, where, answers, lambda s: rollout.difficulty(s, self.env.tag), prefix)

    def score(
        self,
        seeds: list[int],
        where: list[tuple[int, int, int]],
        answers: list[str],
        difficulty: Callable[[int], Any],
        prefix: str = "select",
    ) -> dict[str, float]:
        """The exact success of the table the answers at ``where`` make (an invalid answer is scored as Left),
        split by ``difficulty(seed)``."""
        tag = self.env.tag
        index = {a.lower(): i for i, a in enumerate(ACTIONS)}
        policies: list[dict[tuple[int, int], int]] = [{} for _ in seeds]
        invalid = 0
        for (m, r, c), text in zip(where, answers, strict=True):
            action = index.get((parse_answer(text) or "").strip().lower())
            invalid += action is None
            policies[m][(r, c)] = 0 if action is None else action
        success = [
            policy_success(self.cells(s)[0], self.steps, p, self.slippery) for s, p in zip(seeds, policies, strict=True)
        ]
        out = {
            f"{prefix}/{tag}/success": sum(success) / max(len(success), 1),
            f"{prefix}/{tag}/invalid_cells": float(invalid),
            f"{prefix}/{tag}/exact": 1.0,
        }
        by: dict[int, list[float]] = {}
        for s, v in zip(seeds, success, strict=True):
            k = difficulty(s)
            if k is not None:
                by.setdefault(int(k), []).append(v)
        for k in sorted(by):
            out[f"{prefix}/{tag}/success_len{k}"] = sum(by[k]) / len(by[k])
            out[f"{prefix}/{tag}/n_len{k}"] = float(len(by[k]))
        return out


def _frozenlake(cfg: TrainConfig, env: Any) -> Validator | None:
    ep = cfg.rollout.episode
    if ep.history != "last_k" or ep.history_k != 0:  # the policy must see the current grid alone
        return None
    return FrozenLakeExact(cfg, env)


#: env id -> factory(cfg, env entry) -> validator (None: not exact under these settings)
EXACT_VALIDATORS: dict[str, Callable[[Any, Any], Validator | None]] = {"FrozenLake-v0": _frozenlake}


def exact_validator(cfg: TrainConfig, rollout: Any) -> Validator | None:
    """The exact validator of ``cfg``'s run (one env with an entry in :data:`EXACT_VALIDATORS`, multi-turn,
    a rollout with an engine and a loop: :class:`~rockroll.trainer.rollout.multiturn.MultiTurnDriver`), or None."""
    envs = cfg.rollout.env_mix()
    if cfg.rollout.mode != "multiturn" or len(envs) != 1 or not hasattr(rollout, "loop"):
        return None
    make = EXACT_VALIDATORS.get(envs[0].env_id)
    return None if make is None else make(cfg, envs[0])
