"""The requests of the hf engine's batching thread: what waits (:class:`Pending`), what runs
(:class:`Row`), a static wave (:class:`WaveState`), and how answers go back to the requesters'
event loops. Shared by :mod:`rockroll.agentrl.engines.hf` and its two decoding paths
(:mod:`rockroll.agentrl.engines.hf_slots`, :mod:`rockroll.agentrl.engines.hf_waves`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from rockroll.agentrl.engines.base import GenerationRequest, GenerationResult, SamplingParams
from rockroll.agentrl.engines.kv import Prefix

__all__ = ["Pending", "Row", "WaveState", "PrefillGroup", "draw", "deliver_many", "deliver_error", "post"]


@dataclass
class Pending:
    request: GenerationRequest
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    seed: int


@dataclass
class Row:
    """One running request: its sampler and what it generated so far."""

    pending: Pending
    gen: Any  # torch.Generator
    stops: set[int]
    max_new: int
    toks: list[int] = field(default_factory=list)
    lps: list[float] = field(default_factory=list)
    slot: int = -1
    uniforms: list[float] = field(default_factory=list)  # drawn, not used yet (last = next)
    #: tokens appended by :meth:`finish_forced` after the last sampled one: never fed, so no KV holds them
    forced: int = 0

    @property
    def params(self) -> SamplingParams:
        return self.pending.request.params

    def finish_forced(self) -> bool:
        """Append the rest of a restricted answer when no choice is left in it (its trie's
        :meth:`~rockroll.agentrl.engines.choices.AnswerTrie.forced_tail`, each token at logprob 0, what the
        restricted distribution gives it), so no forward pass is spent on it; True when the row is done."""
        trie = self.params.allowed
        if trie is None:
            return False
        tail = trie.forced_tail(self.toks)
        if not tail or tail[-1] not in self.stops or len(self.toks) + len(tail) > self.max_new:
            return False
        self.toks.extend(tail)
        self.lps.extend([0.0] * len(tail))
        self.forced = len(tail)
        return True

    def fed(self) -> list[int]:
        """The response tokens whose KV the row's slot holds: all but the last sampled one (and the forced
        tail after it)."""
        return self.toks[: max(len(self.toks) - 1 - self.forced, 0)]

    def uniform(self) -> float:
        """The next uniform of the row's generator: drawn 64 at a time (one torch call, not one per
        token; the same numbers as drawing them one by one)."""
        if not self.uniforms:
            n = max(1, min(64, self.max_new - len(self.toks)))
            self.uniforms = draw(self.gen, n)[::-1]
        return self.uniforms.pop()


@dataclass
class WaveState:
    """A static wave (fallback path): rows, their KV cache, attention mask [B, S], last positions [B, 1]."""

    rows: list[Row]
    cache: Any
    mask: Any
    pos: Any


# a prompt group of one admission: its tokens, the requests asking for it, cached tokens, path in the prefix cache
PrefillGroup = tuple[tuple[int, ...], list[Pending], int, Prefix]


def draw(gen: Any, n: int) -> list[float]:
    import torch

    return torch.rand(n, generator=gen, dtype=torch.float64).tolist()


def deliver_many(items: list[tuple[asyncio.Future, GenerationResult]]) -> None:
    for fut, result in items:
        if not fut.done():
            fut.set_result(result)


def deliver_error(fut: asyncio.Future, err: BaseException) -> None:
    if not fut.done():
        fut.set_exception(err)


def post(loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> None:
    """Hand a result to the requester's event loop; a loop that has closed meanwhile (its
    request was cancelled and its ``asyncio.run`` ended) has nobody left to tell."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass
