"""Timeouts of many concurrent awaits, kept by one periodic check (:class:`Deadlines`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["Deadlines"]


class Deadlines:
    """Timeouts of many concurrent awaits, kept by one periodic check instead of a timer per await.

    ``with deadlines.within(timeout_s): await ...`` raises :class:`TimeoutError` when the await
    outlasts ``timeout_s`` (by at most ``TICK_S``), cancelling it, like ``asyncio.timeout``; a
    timer per await costs more than a FrozenLake step (a heap push in the event loop).
    """

    TICK_S = 0.01

    def __init__(self) -> None:
        self._calls: dict[int, list[Any]] = {}  # id -> [deadline, task, fired]
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._loop: asyncio.AbstractEventLoop | None = None

    @contextlib.contextmanager
    def within(self, timeout_s: float) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        entry = [loop.time() + timeout_s, task, False]
        key = id(entry)
        self._calls[key] = entry
        if self._timer is None or self._loop is not loop or entry[0] + self.TICK_S < self._timer_at:
            self._arm(loop, entry[0])
        try:
            yield
        except asyncio.CancelledError:
            if entry[2] and task is not None and task.uncancel() == 0:  # cancelled by us alone
                raise TimeoutError(f"no answer within {timeout_s:.3g}s") from None
            raise
        finally:
            del self._calls[key]

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._loop = loop
        self._timer_at = max(at, loop.time() + self.TICK_S)
        self._timer = loop.call_at(self._timer_at, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._timer_at = None, float("inf")
        now = loop.time()
        soonest = float("inf")
        for entry in list(self._calls.values()):
            if entry[2]:
                continue
            if entry[0] <= now:
                entry[2] = True
                if entry[1] is not None:
                    entry[1].cancel()
            else:
                soonest = min(soonest, entry[0])
        if soonest < float("inf"):
            self._arm(loop, soonest)
