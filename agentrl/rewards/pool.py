"""The reward stage of rollout: reward functions run off the event loop, on a thread pool of their own.

An env manager scores a finished episode with ``reward_fn(trajectory)``. A reward may be slow (an
LLM judge, a test run): run on the event loop, it would hold up every other episode's generation
and env steps. :class:`RewardPool` runs a plain function in a thread of its own pool, so rewards
overlap generation, env steps and each other; an ``async def`` reward (a judge over HTTP) is
awaited on the loop directly, where it waits without holding a thread.

The pool is sized to demand: it starts with no thread and adds one whenever a reward arrives and
every thread is busy, up to ``max_workers`` (the growth of :class:`concurrent.futures.ThreadPoolExecutor`);
rewards beyond that queue. It keeps separate threads from the env calls, so a burst of slow
rewards never delays an env step. Functions named ``inline`` (the env manager's default, the sum of
the env's rewards) are cheap enough to run on the loop: no thread hop, no timeout, not counted.

Failures stay those of the reward stage (:mod:`rockroll.agentrl.errors`): a reward that raises, or
returns something that is not a number, or runs past ``timeout_s``, raises
:class:`~rockroll.agentrl.errors.InfraFailure` with stage ``reward`` (the env manager masks the
episode and does not retry it: a broken reward fails the same way on a replay). A plain reward
past its timeout cannot be stopped: it finishes in its thread, unwaited, still holding that thread.

Accounting: :attr:`RewardPool.counts` sums, over rewards, the seconds spent computing (``busy_s``),
the seconds queued for a thread (``queue_wait_s``), calls, errors and timeouts; ``wall_s`` is the
time during which at least one reward was in flight (what the lock-step env manager counts, whose
other stages are round wall times). :func:`reward_metrics` turns a batch's counts into metrics.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import inspect
import os
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from rockroll.agentrl.errors import InfraFailure
from rockroll.agentrl.trajectory import Trajectory

__all__ = ["RewardFn", "RewardPool", "default_reward_workers", "reward_metrics"]

#: the final reward of a finished episode: a plain function (run in a thread) or an ``async def`` (awaited)
RewardFn = Callable[[Trajectory], float] | Callable[[Trajectory], Awaitable[float]]


def default_reward_workers() -> int:
    """The pool's cap when none is configured: ``min(32, CPUs + 4)``, the thread-pool default."""
    return min(32, (os.cpu_count() or 1) + 4)


def _is_async(fn: Callable[..., Any]) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


class RewardPool:
    """Runs reward functions off the event loop (see the module docstring).

    Args:
        max_workers: most threads computing rewards at once (None: :func:`default_reward_workers`).
        timeout_s: most seconds for one reward, queueing included (None: no limit).
        inline: reward functions called right on the event loop (cheap ones; no timeout applies).
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        timeout_s: float | None = None,
        inline: tuple[Callable[[Trajectory], float], ...] = (),
    ) -> None:
        if max_workers is not None and max_workers < 1:
            raise ValueError(f"max_workers must be >= 1 or None (auto), got {max_workers}")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 or None (no limit), got {timeout_s}")
        self.max_workers = max_workers or default_reward_workers()
        self.timeout_s = timeout_s
        self.inline = inline
        self._executor = cf.ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="reward")
        self._lock = threading.Lock()
        #: busy_s, queue_wait_s, calls, errors, timeouts, wall_s (see the module docstring)
        self.counts: Counter[str] = Counter()
        self._threads: set[int] = set()
        self._in_flight = 0  # rewards being awaited (event-loop side)
        self._since = 0.0  # when the current stretch of in-flight rewards began

    # ------------------------------------------------------------ accounting
    @property
    def threads(self) -> int:
        """Threads the pool has started so far (it grows on demand, never beyond ``max_workers``)."""
        with self._lock:
            return len(self._threads)

    @property
    def wall_s(self) -> float:
        """Seconds during which at least one reward was in flight (the current stretch included)."""
        with self._lock:
            open_s = time.monotonic() - self._since if self._in_flight else 0.0
            return self.counts["wall_s"] + open_s

    def snapshot(self) -> Counter[str]:
        """A copy of :attr:`counts` (subtract two for a batch's share)."""
        with self._lock:
            return self.counts.copy()

    def _add(self, **amounts: float) -> None:
        with self._lock:
            self.counts.update(amounts)

    def _timed(self, fn: Callable[[Trajectory], Any], traj: Trajectory, queued: float) -> tuple[Any, Any]:
        """Worker thread: ``fn(traj)`` timed; (value, None) or (None, the exception)."""
        started = time.perf_counter()
        with self._lock:
            self._threads.add(threading.get_ident())
        try:
            return fn(traj), None
        except Exception as e:  # noqa: BLE001 - answered to the awaiting episode
            return None, e
        finally:
            self._add(busy_s=time.perf_counter() - started, queue_wait_s=started - queued, calls=1)

    # ------------------------------------------------------------ scoring
    async def score(self, fn: RewardFn, traj: Trajectory) -> float:
        """``fn(traj)`` as a float, computed off the event loop; raises :class:`InfraFailure` (stage ``reward``)."""
        if fn in self.inline:
            try:
                return float(fn(traj))  # type: ignore[arg-type]
            except Exception as e:  # noqa: BLE001 - a broken reward function is infra, not the agent
                self._add(errors=1)
                raise InfraFailure("reward", e) from e
        with self._lock:
            if self._in_flight == 0:
                self._since = time.monotonic()
            self._in_flight += 1
        try:
            async with asyncio.timeout(self.timeout_s) as limit:
                try:
                    value = await self._compute(fn, traj)
                    if inspect.isawaitable(value):  # a plain function that returned an awaitable
                        value = await value
                    return float(value)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - a broken reward function is infra, not the agent
                    self._add(errors=1)
                    raise InfraFailure("reward", e) from e
        except TimeoutError as e:
            if not limit.expired():  # raised by the reward itself: handled above
                raise
            self._add(timeouts=1)
            message = f"the reward took longer than reward_timeout_s={self.timeout_s:g}s"
            raise InfraFailure("reward", TimeoutError(message), message) from e
        finally:
            with self._lock:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self.counts["wall_s"] += time.monotonic() - self._since

    async def _compute(self, fn: RewardFn, traj: Trajectory) -> Any:
        queued = time.perf_counter()
        if _is_async(fn):
            try:
                return await fn(traj)  # type: ignore[misc]
            finally:
                self._add(busy_s=time.perf_counter() - queued, calls=1)
        value, error = await asyncio.wrap_future(self._executor.submit(self._timed, fn, traj, queued))
        if error is not None:
            raise error
        return value

    def shutdown(self) -> None:
        """Stop the pool: queued rewards are cancelled, running ones finish in their threads (not waited for)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def reward_metrics(counts: Mapping[str, float]) -> dict[str, float]:
    """``reward/...`` metrics of one batch from the reward path's counts (a difference of two
    :meth:`~rockroll.agentrl.rollout.env_manager.EnvManager.reward_counts`): the mean seconds a reward
    computed and waited for a thread, its timeouts, and the adaptive test-run timeouts'
    (:mod:`rockroll.agentrl.rewards.adaptive_timeout`) runs, cut-offs, estimated seconds saved and mean timeout."""
    out: dict[str, float] = {}
    calls = counts.get("calls", 0)
    if calls:
        out["reward/compute_s"] = counts.get("busy_s", 0.0) / calls
        out["reward/queue_wait_s"] = counts.get("queue_wait_s", 0.0) / calls
        out["reward/timeouts"] = float(counts.get("timeouts", 0))
    issued = counts.get("adaptive_issued", 0)
    if issued:
        out["reward/adaptive_timeout_s"] = counts.get("adaptive_timeout_s", 0.0) / issued
        for key in ("runs", "cutoffs", "saved_s"):
            out[f"reward/adaptive_{key}"] = float(counts.get(f"adaptive_{key}", 0))
    return out
