"""Which answers a multi-turn rollout may sample on an env (``rollout.episode.restrict_answers``).

An env that declares its action set (``EnvSpec.action_set``, :mod:`rockroll.envhub.registry`) gets an
:class:`~rockroll.agentrl.engines.choices.AnswerTrie` of its full answers on every generation request,
when the setting is on and the engine can honour it (``LLMEngine.supports_allowed``: the hf engine).
Envs registered elsewhere (a remote source's own ids) and engines that cannot restrict sample freely.

A tool env (one that declares tools) gets instead, with ``rollout.episode.restrict_tool_calls``, a
:class:`~rockroll.agentrl.engines.tool_grammar.ToolGrammar` of its tools (:func:`restriction`): its calls then
parse and fit their schemas. That setting with an engine that cannot restrict is an error
(:func:`check_engine`), not a silent free sampling.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypeAlias

import rockroll.envhub as envhub
from rockroll.agentrl.engines.choices import AnswerTrie
from rockroll.agentrl.engines.tool_grammar import ToolGrammar, tool_grammar
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.envs.config import ConfigError
from rockroll.envs.tools import Tool

__all__ = ["Restriction", "answer_trie", "check_engine", "declared_actions", "declared_trie", "restriction"]

#: what a turn may sample (``SamplingParams.allowed``): an env's declared answers, or a tool env's call grammar
Restriction: TypeAlias = AnswerTrie | ToolGrammar

log = logging.getLogger(__name__)


def declared_actions(env_id: str) -> tuple[str, ...]:
    """The action set ``env_id``'s spec declares here (empty: none, or an id not registered here)."""
    try:
        return tuple(envhub.spec(env_id).action_set)
    except Exception:  # noqa: BLE001 - an id only a remote source knows: nothing declared here
        return ()


def declared_trie(tokenizer: Any, env_id: str, *, restrict: bool = True) -> AnswerTrie | None:
    """The trie of ``env_id``'s declared answers for ``tokenizer``, or None (``restrict`` off, or none declared)."""
    actions = declared_actions(env_id) if restrict else ()
    return AnswerTrie.from_answers(tokenizer, actions) if actions else None


def answer_trie(engine: Any, env_id: str, *, restrict: bool = True, max_tokens: int | None = None) -> AnswerTrie | None:
    """The trie of ``env_id``'s declared answers for ``engine``'s tokenizer, or None (off, none declared,
    or an engine that cannot restrict). ``max_tokens``: the turn's token cap; a longer answer is logged."""
    if not getattr(engine, "supports_allowed", False):
        return None
    trie = declared_trie(engine.tokenizer, env_id, restrict=restrict)
    if trie is not None and max_tokens is not None and trie.max_len > max_tokens:
        log.warning("%s: an answer takes %d tokens but max_tokens_per_turn is %d", env_id, trie.max_len, max_tokens)
    return trie


def check_engine(engine: Any, cfg: EpisodeConfig) -> None:
    """``ConfigError`` naming the engine when ``cfg.restrict_tool_calls`` is on and ``engine`` cannot restrict."""
    if cfg.restrict_tool_calls and not getattr(engine, "supports_allowed", False):
        raise ConfigError(
            "rollout.episode.restrict_tool_calls",
            f"restrict_tool_calls needs an engine that restricts sampling (hf); {type(engine).__name__} cannot: "
            "use the hf engine or set restrict_tool_calls to false",
            value=True,
        )


def restriction(engine: Any, env_id: str, cfg: EpisodeConfig, tools: Sequence[Tool]) -> Restriction | None:
    """What a turn on ``env_id`` may sample (None: anything): with ``tools`` (a tool env) and
    ``restrict_tool_calls``, the grammar of its calls; else the trie of its declared answers (:func:`answer_trie`)."""
    if tools and cfg.restrict_tool_calls:
        check_engine(engine, cfg)
        return tool_grammar(engine, tools, max_tokens=cfg.max_tokens_per_turn)
    return answer_trie(engine, env_id, restrict=cfg.restrict_answers, max_tokens=cfg.max_tokens_per_turn)
