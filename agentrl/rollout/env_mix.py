"""Env mixing by ratio: one deterministic stream of group slots (ROLL's tag ratios).

Slot ``m`` of a run goes to the env entry furthest behind its share of ``m + 1`` slots, so a batch's
mix depends on its index only and every env stays within one group of its exact share over the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

__all__ = ["RatioStream", "ratio_slots"]


class RatioStream:
    """:func:`ratio_slots` with its position kept (a run reads its batches in order)."""

    def __init__(self, ratios: Sequence[float]) -> None:
        self.weights = [Fraction(r).limit_denominator(10**6) for r in ratios]
        self.total = sum(self.weights)
        self.counts = [0] * len(self.weights)
        self.pos = 0

    def _next(self) -> int:
        m = self.pos + 1
        best = max(range(len(self.weights)), key=lambda i: (m * self.weights[i] / self.total - self.counts[i], -i))
        self.counts[best] += 1
        self.pos = m
        return best

    def slots(self, start: int, count: int) -> list[int]:
        if start < self.pos:
            self.counts, self.pos = [0] * len(self.weights), 0
        while self.pos < start:
            self._next()
        return [self._next() for _ in range(count)]

    def peek(self, count: int) -> list[int]:
        """The next ``count`` slots, the position left where it is."""
        counts, pos = list(self.counts), self.pos
        out = [self._next() for _ in range(count)]
        self.counts, self.pos = counts, pos
        return out


def ratio_slots(ratios: Sequence[float], start: int, count: int) -> list[int]:
    """Env entry of each group slot ``start .. start + count - 1`` of a run mixing envs by ``ratios``.

    Slot ``m`` goes to the entry furthest behind its share of ``m + 1`` slots (ties: the first
    entry). Deterministic, and every prefix of the stream holds each entry within one slot of its
    exact share: ratios [2, 1] give batches of 12 groups exactly 8 + 4, of 16 alternately 11 + 5 and
    10 + 6.
    """
    return RatioStream(ratios).slots(start, count)
