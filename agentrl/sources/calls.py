"""Env resets and steps of many episodes, run together in worker threads (:class:`EnvCalls`).

Resets and steps made in one event-loop iteration (the episodes whose responses came back from one
decoding step) are handed to the source together, grouped by
:meth:`~rockroll.agentrl.sources.kinds.EnvSource.batch_key`: one worker-thread job per group, not one
per call, and through sandboxes one round trip per sandbox; calls made while a group's job runs
join it (one round trip in flight per sandbox, the next one carrying every call made meanwhile).
Calls of a group that run one by one and still wait after ``RESCUE_S`` get more threads, so a slow
or hung env holds up only itself; an env id whose calls take more than ``SLOW_CALL_S`` each (5 ms in
process, 50 ms per call of a round trip) is no longer batched. Inside a sandbox a batch runs its
calls one after another, so a call that hangs there holds up the other sessions of its sandbox in
that batch (they time out with it and are retried).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import contextlib
import threading
import time
from collections.abc import Hashable
from typing import Any

from rockroll.agentrl.sources.kinds import EnvCall, EnvSource
from rockroll.envs.core import TextEnvProtocol

__all__ = ["EnvCalls"]


class _EnvCall:
    __slots__ = ("env", "op", "arg", "env_id", "future", "loop", "queued")

    def __init__(self, env: TextEnvProtocol, op: str, arg: Any, env_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.env, self.op, self.arg, self.env_id, self.loop = env, op, arg, env_id, loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.queued = time.monotonic()


def _settle(done: list[tuple[_EnvCall, Any]]) -> None:
    for call, answer in done:
        if call.future.done():
            continue
        if isinstance(answer, BaseException):
            call.future.set_exception(answer)
        else:
            call.future.set_result(answer)


class _Job:
    """Calls of one batch key waiting for a worker thread; calls made while it runs join it (open).
    ``done``: answers not handed back yet (see :meth:`EnvCalls._work`)."""

    __slots__ = ("calls", "lock", "open", "done", "flushed")

    def __init__(self, calls: list[_EnvCall]) -> None:
        self.calls = collections.deque(calls)
        self.lock = threading.Lock()
        self.open = True
        self.done: list[tuple[_EnvCall, Any]] = []
        self.flushed = time.monotonic()

    def add(self, calls: list[_EnvCall]) -> bool:
        with self.lock:
            if self.open:
                self.calls.extend(calls)
            return self.open


class EnvCalls:
    """Env resets and steps, run together (see the module docstring).

    Calls made in one event-loop iteration are grouped by batch key; a group joins the job already
    running for its key (its worker takes the new calls when it is done with the current ones:
    through sandboxes, one round trip in flight per sandbox, the next one carrying every call made
    meanwhile) or starts one.
    """

    RESCUE_S = 0.02  # calls run one by one that wait this long get more threads
    #: mean seconds per call above which an env id's calls are no longer batched: one by one in a
    #: thread, or (round trips, where a batch runs in the sandbox one call after another) per batch
    SLOW_CALL_S = {False: 0.005, True: 0.05}

    def __init__(self, source: EnvSource, executor: cf.ThreadPoolExecutor) -> None:
        self.source = source
        self.executor = executor
        self.round_trips = bool(source.round_trip_batches)
        self.slow_s = self.SLOW_CALL_S[self.round_trips]
        self.cost: dict[str, float] = {}  # moving mean of seconds per call, by env id
        self._pending: list[_EnvCall] = []
        self._jobs: dict[Hashable, _Job] = {}

    def call(self, env: TextEnvProtocol, env_id: str, op: str, arg: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        c = _EnvCall(env, op, arg, env_id, loop)
        if not self._pending:
            loop.call_soon(self._flush, loop)
        self._pending.append(c)
        return c.future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        calls, self._pending = self._pending, []
        groups: dict[Hashable, list[_EnvCall]] = {}
        for c in calls:
            key = None if self.cost.get(c.env_id, 0.0) > self.slow_s else self.source.batch_key(c.env)
            if key is None:
                self._spawn(_Job([c]))
            else:
                groups.setdefault(key, []).append(c)
        for key, group in groups.items():
            job = self._jobs.get(key)
            if job is not None and job.add(group):
                continue
            job = self._jobs[key] = _Job(group)
            if self._spawn(job) and not self.round_trips:
                loop.call_later(self.RESCUE_S, self._rescue, job, loop)

    def _spawn(self, job: _Job) -> bool:
        try:
            self.executor.submit(self._work, job)
            return True
        except RuntimeError as e:  # the pool is shut down
            with job.lock:
                job.open = False
                left, job.calls = list(job.calls), collections.deque()
            _settle([(c, e) for c in left])
            return False

    def _rescue(self, job: _Job, loop: asyncio.AbstractEventLoop) -> None:
        """Hand back the answers a job holds, and more threads for it when its oldest call has
        waited ``RESCUE_S`` (a slow or hung call ahead of it)."""
        if not job.open:
            return
        with job.lock:
            held, job.done = job.done, []
        _settle(held)
        calls = job.calls
        if calls and time.monotonic() - calls[0].queued > self.RESCUE_S:
            for _ in range(min(len(calls), 16)):
                if not self._spawn(job):
                    return
        loop.call_later(self.RESCUE_S, self._rescue, job, loop)

    def _take(self, job: _Job) -> list[_EnvCall]:
        """The next calls to run (all waiting ones for round trips, else one); closes an empty job."""
        chunk: list[_EnvCall] = []
        with job.lock:
            while job.calls and (not chunk or self.round_trips):
                c = job.calls.popleft()
                if not c.future.cancelled():  # timed out or cancelled before it started: never run
                    chunk.append(c)
            if not chunk:
                job.open = False
        return chunk

    def _work(self, job: _Job) -> None:
        """Worker thread: run the job's calls until none is left. Answers go back after each round
        trip; calls run one by one hand theirs back every 2 ms and at the end (what a worker holds
        when the next call hangs, the job's rescue check hands back)."""
        while chunk := self._take(job):
            started = time.perf_counter()
            calls: list[EnvCall] = [(c.env, c.op, c.arg) for c in chunk]  # type: ignore[misc]
            try:
                answers = self.source.call_batch(calls)
            except Exception as e:  # noqa: BLE001 - a broken source fails its calls, not the thread
                answers = [e] * len(chunk)
            each = (time.perf_counter() - started) / len(chunk)
            for c in chunk:
                self.cost[c.env_id] = 0.8 * self.cost.get(c.env_id, each) + 0.2 * each
            now = time.monotonic()
            with job.lock:
                job.done.extend(zip(chunk, answers, strict=True))
                if self.round_trips or not job.calls or now - job.flushed > 0.002:
                    out, job.done, job.flushed = job.done, [], now
                else:
                    out = []
            self._deliver(out)
        with job.lock:
            out, job.done = job.done, []
        self._deliver(out)

    @staticmethod
    def _deliver(done: list[tuple[_EnvCall, Any]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_EnvCall, Any]]] = {}
        for c, answer in done:
            by_loop.setdefault(c.loop, []).append((c, answer))
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                loop.call_soon_threadsafe(_settle, items)
