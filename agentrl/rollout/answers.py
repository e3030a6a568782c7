"""Which answers a multi-turn rollout may sample on an env (``rollout.episode.restrict_answers``).

An env that declares its action set (``EnvSpec.action_set``, :mod:`rockroll.envhub.registry`) gets an
:class:`~rockroll.agentrl.engines.choices.AnswerTrie` of its full answers on every generation request,
when the setting is on and the engine can honour it (``LLMEngine.supports_allowed``: the hf engine).
Envs registered elsewhere (a remote source's own ids) and engines that cannot restrict sample freely.
"""

from __future__ import annotations

import logging
from typing import Any

import rockroll.envhub as envhub
from rockroll.agentrl.engines.choices import AnswerTrie

__all__ = ["answer_trie", "declared_actions", "declared_trie"]

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
