"""Restricted answers: the policy chooses among a fixed set of whole responses (an env's action set).

An env may declare the answers it takes in every state (``EnvSpec.action_set``; FrozenLake: its four
moves). The multi-turn rollout then hands the engine an :class:`AnswerTrie` of the full responses,
``<answer>X</answer>`` followed by the end-of-turn token, one token sequence per action, on
``SamplingParams.allowed``. At each decoding step the engine keeps only the trie's children of what it
generated so far (:func:`mask_logits`: every other token's logit is -inf), samples from the
renormalised distribution (greedy: the argmax among them) and records the logprob under it. A response
then always ends on the trie's stop token, so it cannot run into the token cap.

The trainer computes its logprobs under the same restriction (:func:`rockroll.trainer.learner.batch.token_logprobs`
with the turn's :meth:`AnswerTrie.positions`), so rollout and update agree: the same logprob for the
same tokens, and -inf for a token outside the set in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["AnswerTrie", "allowed_tensor", "answer_tokens", "mask_logits"]


def answer_tokens(tokenizer: Any, answer: str) -> list[int]:
    """The response that plays ``answer``: ``<answer>ANSWER</answer>`` and the tokenizer's EOS (the end of a
    turn), the format the multi-turn warm start teaches (:func:`rockroll.trainer.learner.sft.expert_trajectory`)."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("an answer needs a tokenizer with an EOS token (the end of a turn)")
    return [*tokenizer.encode(f"<answer>{answer}</answer>", add_special_tokens=False), int(eos)]


class AnswerTrie:
    """The prefix trie of the allowed responses (token id sequences, each ending in a stop token)."""

    def __init__(self, sequences: Sequence[Sequence[int]]) -> None:
        seqs = [tuple(int(t) for t in s) for s in sequences]
        if not seqs or any(not s for s in seqs):
            raise ValueError("an AnswerTrie needs at least one non-empty token sequence")
        self.sequences = tuple(dict.fromkeys(seqs))
        self._ends = set(self.sequences)
        self._tails: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._next: dict[tuple[int, ...], tuple[int, ...]] = {}
        for s in self.sequences:
            for i in range(len(s)):
                kids = self._next.setdefault(s[:i], ())
                if s[i] not in kids:
                    self._next[s[:i]] = (*kids, s[i])

    @classmethod
    def from_answers(cls, tokenizer: Any, answers: Sequence[str]) -> AnswerTrie:
        """The trie of :func:`answer_tokens` for each answer."""
        return cls([answer_tokens(tokenizer, a) for a in answers])

    @property
    def max_len(self) -> int:
        """Tokens of the longest allowed response."""
        return max(map(len, self.sequences))

    def next_ids(self, prefix: Sequence[int]) -> tuple[int, ...]:
        """Tokens allowed after ``prefix`` (empty: ``prefix`` left the trie or ended: no restriction)."""
        return self._next.get(tuple(prefix), ())

    def forced_tail(self, prefix: Sequence[int]) -> tuple[int, ...]:
        """The tokens that must follow ``prefix`` to the end of its sequence when no choice is left on the
        way (one allowed id at every position, the last a sequence's stop token); empty when a choice is
        ahead or ``prefix`` is not inside the trie. Under the restricted distribution each of them has
        probability 1 (logprob 0), so an engine may append them without a forward pass."""
        key = tuple(prefix)
        if key not in self._next:  # a whole sequence, or off the trie
            return ()
        tail = self._tails.get(key)
        if tail is None:
            cur, out = key, []
            while len(kids := self._next.get(cur, ())) == 1:
                cur = (*cur, kids[0])
                out.append(kids[0])
            tail = self._tails[key] = tuple(out) if out and cur in self._ends else ()
        return tail

    def choice_point(self) -> tuple[tuple[int, ...], dict[int, tuple[int, ...]]] | None:
        """``(prefix, {choice id: whole sequence})`` when the trie holds one choice only: a forced prefix, one
        position with several ids, a forced tail after each. Then greedy decoding is the argmax of one
        forward's logits after ``prompt + prefix`` among the choice ids. None when there are more choices."""
        prefix: tuple[int, ...] = ()
        while len(kids := self._next.get(prefix, ())) == 1:
            prefix = (*prefix, kids[0])
        if prefix in self._ends or not kids:
            return None
        out = {}
        for k in kids:
            tail = self.forced_tail((*prefix, k))
            whole = (*prefix, k, *tail)
            if whole not in self._ends:
                return None
            out[k] = whole
        return prefix, out

    def positions(self, tokens: Sequence[int]) -> list[tuple[int, ...]]:
        """The allowed ids at each position of ``tokens`` (what the engine chose among there)."""
        return [self.next_ids(tokens[:i]) for i in range(len(tokens))]


def allowed_tensor(sets: Sequence[Sequence[int]], device: Any = None) -> torch.Tensor:
    """``[P, K]`` long tensor of allowed ids per position, -1-padded (a row of -1: no restriction)."""
    import torch

    width = max((len(s) for s in sets), default=0) or 1
    padded = [[*s, *([-1] * (width - len(s)))] for s in sets]  # one tensor call, not one per row
    out = torch.tensor(padded, dtype=torch.long).reshape(len(sets), width)
    return out if device is None else out.to(device)


def mask_logits(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """``logits`` ``[..., V]`` with every id outside ``allowed`` ``[..., K]`` (-1-padded) set to -inf; positions
    whose ``allowed`` is all -1 are left as they are. ``log_softmax`` of the result is the restricted
    distribution's logprob (renormalised over the allowed ids; -inf elsewhere)."""
    import torch

    allowed = allowed.to(logits.device)
    valid = allowed >= 0
    index = torch.where(valid, allowed, allowed[..., :1].clamp(min=0))  # a pad repeats the first allowed id
    keep = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
    keep.scatter_(-1, index, torch.ones_like(index, dtype=torch.bool))
    keep |= ~valid.any(-1, keepdim=True)
    return logits.masked_fill(~keep, float("-inf"))
