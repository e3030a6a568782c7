"""One rendering of a turn's answer (``<answer>X</answer>`` + EOS) for the restricted answers' trie and the warm
start's demos, and the declared answers' trie with and without an engine."""

from __future__ import annotations

from typing import Any

import pytest

from rockroll.agentrl.engines.choices import AnswerTrie, answer_tokens
from rockroll.agentrl.rollout.answers import answer_trie, declared_trie


class _Tok:
    """Characters as token ids; EOS 0."""

    def __init__(self, eos: int | None = 0) -> None:
        self.eos_token_id = eos

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        assert not add_special_tokens
        return [ord(ch) for ch in text]


def test_an_answer_is_its_tags_and_the_end_of_turn() -> None:
    assert answer_tokens(_Tok(), "Up") == [*map(ord, "<answer>Up</answer>"), 0]
    assert AnswerTrie.from_answers(_Tok(), ["Up", "Down"]).sequences == (
        tuple(answer_tokens(_Tok(), "Up")),
        tuple(answer_tokens(_Tok(), "Down")),
    )
    with pytest.raises(ValueError, match="EOS"):
        answer_tokens(_Tok(eos=None), "Up")


def test_the_declared_answers_trie() -> None:
    trie = declared_trie(_Tok(), "FrozenLake-v0")
    assert trie is not None and len(trie.sequences) == 4
    assert declared_trie(_Tok(), "FrozenLake-v0", restrict=False) is None
    assert declared_trie(_Tok(), "NoSuchEnv-v0") is None

    class _Engine:
        tokenizer = _Tok()
        supports_allowed: Any = True

    assert answer_trie(_Engine(), "FrozenLake-v0") is not None
    assert answer_trie(_Engine(), "FrozenLake-v0").sequences == trie.sequences  # type: ignore[union-attr]
    _Engine.supports_allowed = False
    assert answer_trie(_Engine(), "FrozenLake-v0") is None
