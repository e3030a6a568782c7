"""The one retry helper: its curve, its bounds, sync and async alike."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from rockroll.sandbox.retry import (
    FIRST_DELAY_S,
    MAX_DELAY_S,
    Backoff,
    aretry_call,
    await_until,
    delays,
    retry_call,
    wait_until,
)


def test_curve_doubles_up_to_the_cap_with_jitter() -> None:
    waits = list(itertools.islice(delays(), 12))
    for n, wait in enumerate(waits):
        nominal = min(FIRST_DELAY_S * 2**n, MAX_DELAY_S)
        assert nominal / 2 <= wait <= nominal
    assert all(w <= 0.05 for w in itertools.islice(delays(max_delay_s=0.05), 20))


def test_backoff_needs_a_bound_and_sane_arguments() -> None:
    for bad in ({}, {"attempts": 0}, {"attempts": 2, "max_delay_s": 0}):
        with pytest.raises(ValueError):
            Backoff(**bad)


def test_backoff_counts_attempts_and_sleeps_between_them_only() -> None:
    t0 = time.monotonic()
    assert list(Backoff(attempts=1)) == [0]
    assert time.monotonic() - t0 < 0.005
    assert list(Backoff(attempts=4, max_delay_s=0.001)) == [0, 1, 2, 3]


def test_backoff_stops_at_the_deadline_with_a_last_attempt_there() -> None:
    t0 = time.monotonic()
    stamps = [time.monotonic() - t0 for _ in Backoff(timeout_s=0.15, max_delay_s=0.02)]
    assert 0.15 <= stamps[-1] < 0.3 and len(stamps) > 5
    assert list(Backoff(timeout_s=0)) == [0]


def test_retry_call_retries_only_the_given_errors_and_raises_the_last() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError(f"try {len(calls)}")
        return "ok"

    assert retry_call(flaky, retry_on=ConnectionError, attempts=3, max_delay_s=0.001) == "ok"
    calls.clear()
    with pytest.raises(ConnectionError, match="try 2"):
        retry_call(flaky, retry_on=ConnectionError, attempts=2, max_delay_s=0.001)
    calls.clear()
    with pytest.raises(ConnectionError, match="try 1"):  # not retried: not a retry_on error
        retry_call(flaky, retry_on=(), attempts=5)
    assert len(calls) == 1


def test_async_variants() -> None:
    calls: list[int] = []

    async def flaky() -> int:
        calls.append(1)
        if len(calls) < 2:
            raise TimeoutError
        return len(calls)

    async def main() -> None:
        assert await aretry_call(flaky, retry_on=TimeoutError, attempts=2, max_delay_s=0.001) == 2
        assert [a async for a in Backoff(attempts=3, max_delay_s=0.001)] == [0, 1, 2]
        assert not await await_until(lambda: False, 0.05)
        t0 = time.monotonic()
        assert await await_until(lambda: time.monotonic() - t0 > 0.03, 5)

    asyncio.run(main())


def test_wait_until() -> None:
    t0 = time.monotonic()
    assert wait_until(lambda: time.monotonic() - t0 > 0.05, 5, max_delay_s=0.01)
    assert time.monotonic() - t0 < 1
    assert not wait_until(lambda: False, 0.05)


def test_backoff_shares_an_absolute_deadline() -> None:
    deadline = time.monotonic() + 0.05
    list(Backoff(deadline=deadline, max_delay_s=0.01))
    assert time.monotonic() >= deadline
    assert list(Backoff(deadline=time.monotonic() - 1, attempts=5)) == [0]  # passed already: one attempt


def test_the_time_limit_counts_from_the_start_of_the_first_attempt() -> None:
    t0 = time.monotonic()
    for attempt in Backoff(timeout_s=0.1, max_delay_s=0.01):
        if attempt == 0:
            time.sleep(0.15)  # a slow first attempt uses the whole time
    assert attempt == 0 and time.monotonic() - t0 < 0.2
