"""rockroll's one retry policy: one backoff curve, named constants, the same loop sync and async.

Who retries what:

* **Connection errors of HTTP clients** (the request was not sent yet) are retried by the httpx
  transport: ``httpx.HTTPTransport(retries=n)`` / ``httpx.AsyncHTTPTransport(retries=n)``.
* **Everything else** that waits and tries again (a call that failed for a passing reason, a state
  that is not there yet) loops over :class:`Backoff`, which sleeps the curve between attempts and
  ends after ``attempts`` tries or at a time limit (``timeout_s`` or an absolute ``deadline``); one
  bound is required, so no loop is unbounded::

      for _ in Backoff(timeout_s=30):           # ``async for`` in a coroutine
          try:
              return open_thing()
          except CapacityError:
              pass                              # wait the next delay, then try again
      raise ...                                 # attempts or time used up

  :func:`retry_call` / :func:`aretry_call` (retry a call on given errors) and :func:`wait_until` /
  :func:`await_until` (poll a predicate) are the two common loops, written once.

**Never resend a call that may have changed state on the other side.** An env ``step`` or
``reset`` whose request reached its server is not retried: a resend could apply it twice. Its
error is surfaced (rollout code then replays the episode on a fresh env); only idempotent calls
(reads, ``PUT`` of a whole value) are resent after a dropped connection.

The curve: attempt ``n`` (from 1) waits ``FIRST_DELAY_S * GROWTH**(n-1)``, capped at
``max_delay_s`` (:data:`MAX_DELAY_S` for calls to a server that is struggling,
:data:`POLL_MAX_DELAY_S` for polls of state that is cheap to ask), drawn from the upper half of that
value (jitter: many clients waiting on one server do not retry in lockstep), and never past the
deadline: the last attempt runs at the deadline.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

__all__ = [
    "FIRST_DELAY_S",
    "GROWTH",
    "MAX_DELAY_S",
    "POLL_MAX_DELAY_S",
    "Backoff",
    "delays",
    "retry_call",
    "aretry_call",
    "wait_until",
    "await_until",
]

T = TypeVar("T")

FIRST_DELAY_S = 0.01
"""The first wait (seconds)."""
GROWTH = 2.0
"""Each wait is this times the previous one, up to the cap."""
MAX_DELAY_S = 1.0
"""Cap of the waits between retries of a call to a server (or anything that may be overloaded)."""
POLL_MAX_DELAY_S = 0.1
"""Cap of the waits between polls of local state (cheap to ask; a short cap keeps latency low)."""

_Errors = type[BaseException] | tuple[type[BaseException], ...]


def delays(max_delay_s: float = MAX_DELAY_S) -> Iterator[float]:
    """The curve, endless: ``0.01, 0.02, 0.04, ...`` capped at ``max_delay_s``, each jittered into ``[d/2, d]``."""
    nominal = FIRST_DELAY_S
    while True:
        capped = min(nominal, max_delay_s)
        yield random.uniform(capped / 2, capped)
        nominal *= GROWTH


class Backoff:
    """Attempt numbers ``0, 1, 2, ...`` with the curve's sleep before each but the first (see the module docstring).

    Args:
        attempts: tries in all (the first included); ``None``: as many as the time allows.
        timeout_s: seconds from the start of the loop after which no new attempt starts.
        deadline: the same as a ``time.monotonic()`` instant (one shared with other waits).
        max_delay_s: the cap of one wait (:data:`MAX_DELAY_S` or :data:`POLL_MAX_DELAY_S`).
    """

    def __init__(
        self,
        *,
        attempts: int | None = None,
        timeout_s: float | None = None,
        deadline: float | None = None,
        max_delay_s: float = MAX_DELAY_S,
    ) -> None:
        if attempts is None and timeout_s is None and deadline is None:
            raise ValueError("Backoff needs attempts=, timeout_s= or deadline=: a retry loop must end")
        if attempts is not None and attempts < 1:
            raise ValueError(f"attempts must be >= 1 (the first try counts), got {attempts}")
        if max_delay_s <= 0:
            raise ValueError(f"max_delay_s must be > 0, got {max_delay_s}")
        self.attempts = attempts
        self.timeout_s = timeout_s
        self.deadline = deadline
        self.max_delay_s = max_delay_s

    def _waits(self) -> Iterator[float | None]:
        """The wait before each next attempt, ``None`` when there is none; the clock starts at this call."""
        ends = [self.deadline, None if self.timeout_s is None else time.monotonic() + self.timeout_s]
        return self._waits_until(min((t for t in ends if t is not None), default=None))

    def _waits_until(self, deadline: float | None) -> Iterator[float | None]:
        curve = delays(self.max_delay_s)
        done = 1
        while self.attempts is None or done < self.attempts:
            wait = next(curve)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                wait = min(wait, left)
            yield wait
            done += 1
        yield None

    def __iter__(self) -> Iterator[int]:
        waits = self._waits()
        attempt = 0
        while True:
            yield attempt
            wait = next(waits)
            if wait is None:
                return
            time.sleep(wait)
            attempt += 1

    async def __aiter__(self) -> AsyncIterator[int]:
        waits = self._waits()
        attempt = 0
        while True:
            yield attempt
            wait = next(waits)
            if wait is None:
                return
            await asyncio.sleep(wait)
            attempt += 1


def retry_call(
    fn: Callable[[], T],
    *,
    retry_on: _Errors,
    attempts: int | None = None,
    timeout_s: float | None = None,
    max_delay_s: float = MAX_DELAY_S,
) -> T:
    """``fn()``, called again on ``retry_on`` errors until it returns or the :class:`Backoff` ends (then its last error)."""
    error: BaseException | None = None
    for _ in Backoff(attempts=attempts, timeout_s=timeout_s, max_delay_s=max_delay_s):
        try:
            return fn()
        except retry_on as e:
            error = e
    raise _last(error)


async def aretry_call(
    fn: Callable[[], Awaitable[T]],
    *,
    retry_on: _Errors,
    attempts: int | None = None,
    timeout_s: float | None = None,
    max_delay_s: float = MAX_DELAY_S,
) -> T:
    """:func:`retry_call` for a coroutine function."""
    error: BaseException | None = None
    async for _ in Backoff(attempts=attempts, timeout_s=timeout_s, max_delay_s=max_delay_s):
        try:
            return await fn()
        except retry_on as e:
            error = e
    raise _last(error)


def wait_until(predicate: Callable[[], object], timeout_s: float, *, max_delay_s: float = POLL_MAX_DELAY_S) -> bool:
    """Poll ``predicate()`` until it is true (``True``) or ``timeout_s`` passes (``False``)."""
    return any(predicate() for _ in Backoff(timeout_s=timeout_s, max_delay_s=max_delay_s))


async def await_until(
    predicate: Callable[[], object], timeout_s: float, *, max_delay_s: float = POLL_MAX_DELAY_S
) -> bool:
    """:func:`wait_until` in a coroutine (``predicate`` is a plain, quick function)."""
    async for _ in Backoff(timeout_s=timeout_s, max_delay_s=max_delay_s):
        if predicate():
            return True
    return False


def _last(error: BaseException | None) -> BaseException:
    if error is None:  # pragma: no cover - Backoff always yields a first attempt
        return RuntimeError("retry loop ended without an attempt")
    return error
