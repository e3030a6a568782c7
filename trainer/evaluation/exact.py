"""Exact validation: the checkpoint is chosen on a score without sampling noise where the env allows one.

200 played greedy episodes on slippery FrozenLake have a standard error of about 3.5 points, more than
RL moves the policy between evaluations, so the best of them is mostly the luckiest. A policy that sees
the current grid alone (``rollout.episode.history: last_k`` with ``history_k: 0``) is a table
``cell -> action`` per map: this asks the engine for its greedy answer at every non-terminal cell of each
validation map (one batched generation, restricted to the env's declared answers when the rollout
restricts them) and scores the table exactly by dynamic programming over the slips
(:func:`rockroll.envs.frozenlake.exact.policy_success`). The same maps give the same number for the same policy.
The pieces (:func:`map_cells`, :func:`cell_prompts`, :func:`table_success`) also score an exported model in
``bench/learning/frozenlake_exact_eval.py``.

:data:`EXACT_VALIDATORS` maps an env id to a factory ``(cfg, env entry) -> validator | None`` (None: the
settings do not allow an exact score); a validator is ``(rollout, seeds) -> select/<tag>/... metrics``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import rockroll.envhub as envhub
from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
from rockroll.agentrl.engines.choices import AnswerTrie
from rockroll.agentrl.models.chat import PromptBuilder, format_observation
from rockroll.agentrl.rollout.answers import declared_trie
from rockroll.envs.core import parse_answer
from rockroll.envs.frozenlake.exact import policy_success
from rockroll.envs.frozenlake.maps import ACTIONS

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig

__all__ = [
    "EXACT_VALIDATORS",
    "FrozenLakeExact",
    "cell_action",
    "cell_prompts",
    "env_system_prompt",
    "exact_validator",
    "map_cells",
    "table_success",
]

Validator = Callable[[Any, list[int]], dict[str, float]]
#: a map's rows, and its non-terminal cells with the observation there ``(row, col, obs)``
Cells = tuple[tuple[str, ...], list[tuple[int, int, str]]]

_INDEX = {a.lower(): i for i, a in enumerate(ACTIONS)}


def map_cells(env_id: str, env_kwargs: dict[str, Any], seed: int) -> Cells:
    """The map of ``seed`` and the observation at each of its non-terminal cells ``(row, col, obs)``."""
    env = envhub.make(env_id, **env_kwargs)
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
        return grid, out
    finally:
        env.close()


def env_system_prompt(env_id: str, env_kwargs: dict[str, Any]) -> str:
    """The env's system prompt (what ``system_prompt: env`` shows the policy)."""
    probe = envhub.make(env_id, **env_kwargs)
    try:
        return str(probe.system_prompt())
    finally:
        probe.close()


def cell_prompts(
    tok: Any, system: str, cells: list[list[tuple[int, int, str]]], observation_format: str, max_new_tokens: int
) -> tuple[list[tuple[int, int, int]], list[list[int]]]:
    """``(where, prompts)``: ``(map index, row, col)`` and the prompt of a policy that sees the current grid
    alone at every cell of ``cells`` (per map, :func:`map_cells`'s)."""
    where, prompts = [], []
    for m, on_map in enumerate(cells):
        for r, c, obs in on_map:
            builder = PromptBuilder(tok, system, history="last_k", last_k=0, max_new_tokens=max_new_tokens)
            prompts.append(builder.first_prompt(format_observation(obs, observation_format)))
            where.append((m, r, c))
    return where, prompts


def cell_action(text: str) -> int | None:
    """The action index an answer ``text`` names (None: not one of the four moves)."""
    return _INDEX.get((parse_answer(text) or "").strip().lower())


def table_success(
    grids: list[tuple[str, ...]],
    where: list[tuple[int, int, int]],
    answers: list[str],
    steps: int,
    slippery: bool = True,
) -> tuple[list[float], list[int]]:
    """Per map: the exact success of the table the answers at ``where`` make (an invalid answer is scored as
    Left), and its invalid cells."""
    policies: list[dict[tuple[int, int], int]] = [{} for _ in grids]
    invalid = [0] * len(grids)
    for (m, r, c), text in zip(where, answers, strict=True):
        action = cell_action(text)
        invalid[m] += action is None
        policies[m][(r, c)] = 0 if action is None else action
    success = [policy_success(g, steps, p, slippery) for g, p in zip(grids, policies, strict=True)]
    return success, invalid


class FrozenLakeExact:
    """Exact greedy success of the rollout engine's policy on FrozenLake maps (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, env: Any) -> None:
        self.cfg, self.env = cfg, env
        kw = dict(env.env_kwargs)
        self.slippery = bool(kw.get("is_slippery", True))
        limit = envhub.spec(env.env_id).max_steps
        turns = cfg.rollout.episode.max_turns
        self.steps = min(turns, limit) if limit else turns
        self._cells: dict[int, Cells] = {}
        self._prompts: dict[tuple[int, tuple[int, ...]], tuple[list[tuple[int, int, int]], list[list[int]]]] = {}
        self._tries: dict[int, tuple[Any, AnswerTrie | None]] = {}

    def cells(self, seed: int) -> Cells:
        """The map of ``seed`` and the observation at each of its non-terminal cells ``(row, col, obs)``."""
        if seed not in self._cells:
            self._cells[seed] = map_cells(self.env.env_id, self.env.env_kwargs, seed)
        return self._cells[seed]

    def system(self) -> str:
        """The system prompt the policy sees (``system_prompt: env``), else empty."""
        if self.cfg.rollout.episode.system_prompt != "env":
            return ""
        return env_system_prompt(self.env.env_id, self.env.env_kwargs)

    def answers(self, tok: Any) -> AnswerTrie | None:
        """The trie of the env's declared answers for ``tok`` (None: ``restrict_answers`` off, or none
        declared), built once per tokenizer: the engine's validation and the background one share it."""
        if id(tok) not in self._tries:
            trie = declared_trie(tok, self.env.env_id, restrict=self.cfg.rollout.episode.restrict_answers)
            self._tries[id(tok)] = (tok, trie)  # the tokenizer kept: its id is not reused while cached
        return self._tries[id(tok)][1]

    def prompts(self, tok: Any, seeds: list[int]) -> tuple[list[tuple[int, int, int]], list[list[int]]]:
        """``(where, prompts)``: ``(map index, row, col)`` and the policy's prompt at every non-terminal cell
        (kept: validation asks the same maps every time)."""
        key = (id(tok), tuple(seeds))
        if key not in self._prompts:
            ep, cells = self.cfg.rollout.episode, [self.cells(s)[1] for s in seeds]
            built = cell_prompts(tok, self.system(), cells, ep.observation_format, ep.max_tokens_per_turn)
            self._prompts = {key: built}
        return self._prompts[key]

    def __call__(self, rollout: Any, seeds: list[int], prefix: str = "select") -> dict[str, float]:
        """Score the rollout engine's greedy policy (one batched generation through the engine)."""
        ep, engine = self.cfg.rollout.episode, rollout.engine
        tok = engine.tokenizer
        trie = self.answers(tok) if getattr(engine, "supports_allowed", False) else None
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
        grids = [self.cells(s)[0] for s in seeds]
        success, invalid = table_success(grids, where, answers, self.steps, self.slippery)
        out = {
            f"{prefix}/{tag}/success": sum(success) / max(len(success), 1),
            f"{prefix}/{tag}/invalid_cells": float(sum(invalid)),
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
