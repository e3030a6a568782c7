"""Env managers: play one env for whole episodes with an LLM engine, producing :class:`Trajectory`.

:meth:`EnvManager.run` plays one episode: open an env from the :class:`~rockroll.agentrl.env_source.EnvSource`
(``sandbox_start``), ``reset`` on the episode's seed, then per turn build the prompt
(:class:`~rockroll.agentrl.chat.PromptBuilder`), ``generate`` (at most ``max_tokens_per_turn``), ``step`` the
env with the response text, until ``terminated``, ``truncated`` or ``max_turns``; then compute the
reward. Every stage runs in :func:`~rockroll.agentrl.errors.boundary`: an infra failure restarts the episode
on a fresh env while the per-episode deadline (which includes sandbox start) and ``max_retries``
allow, else the trajectory comes back masked with a ``FailureTag(kind="infra")``.

The reward runs off the event loop, in a :class:`~rockroll.agentrl.reward_pool.RewardPool` of its
own (``reward_workers``, ``reward_timeout_s``), so a slow reward (a judge, a test run) overlaps the
other episodes' generation and env steps. With ``adaptive_reward_timeout`` each reset carries the
option ``test_timeouts`` (per task) from :class:`~rockroll.agentrl.adaptive_timeout.AdaptiveTimeouts`,
told the episode's test run when it ends.

Blocking env calls run in a thread pool; a call that times out leaves its thread to finish on its
own, and its env is closed in the background. An env whose attempt ended cleanly is given back as
reusable (:meth:`~rockroll.agentrl.env_source.EnvSource.give_back`): a sandbox source keeps the
session for the next episode instead of closing it and opening a new one. Opens run in a pool of
their own: an open may block for long (a full sandbox pool is backpressure), and if opens could
take every thread, the steps and closes that free session slots would queue behind them for ever.
Envs are always given back, also when the episode is cancelled (a straggler of a redundant group):
:meth:`EnvManager.drain` waits for those closes.

What a turn costs the event loop is kept small, since at a few thousand turns per second it is the
limit (the engine's batching thread needs the interpreter too):

* Resets and steps made in one event-loop iteration (the episodes whose responses came back from
  one decoding step) are handed to the source together, grouped by
  :meth:`~rockroll.agentrl.env_source.EnvSource.batch_key`: one worker-thread job per group, not
  one per call, and through sandboxes one round trip per sandbox; calls made while a group's job
  runs join it (one round trip in flight per sandbox, the next one carrying every call made
  meanwhile). Calls of a group that run one by one and still wait after ``RESCUE_S`` get more
  threads, so a slow or hung env holds up only itself; an env id whose calls take more than
  ``SLOW_CALL_S`` each (5 ms in process, 50 ms per call of a round trip) is no longer batched.
  Inside a sandbox a batch runs its calls one after another, so a call that hangs there holds up
  the other sessions of its sandbox in that batch (they time out with it and are retried).
* Timeouts are kept by one periodic check (:class:`Deadlines`), not a timer (and a task) per call.
* The chat template, the encoding of a prompt and the decoding of a short response are memoised
  across episodes (observations repeat: the same grid, the same prompt, the same answer).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rockroll.agentrl.adaptive_timeout import AdaptiveTimeouts
from rockroll.agentrl.chat import ContextExceeded, PromptBuilder, format_observation
from rockroll.agentrl.config import EpisodeConfig
from rockroll.agentrl.engines.base import GenerationRequest, GenerationResult, LLMEngine, SamplingParams
from rockroll.agentrl.env_source import EnvCall, EnvSource
from rockroll.agentrl.errors import InfraFailure, boundary
from rockroll.agentrl.hedging import AttemptKey, CallWatch
from rockroll.agentrl.reward_pool import RewardFn, RewardPool
from rockroll.agentrl.trajectory import FailureTag, Trajectory, Turn
from rockroll.envs.core import TextEnvProtocol
from rockroll.sandbox.retry import Backoff, await_until

log = logging.getLogger(__name__)

__all__ = ["Deadlines", "EnvManager", "EpisodeSpec", "GenerationGate", "RewardFn"]

T = TypeVar("T")


@dataclass
class EpisodeSpec:
    """Which episode to play."""

    env_id: str
    seed: int
    group_id: str = "g0"
    episode_id: str = "g0/0"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    env_tag: str = ""
    sample_seed: int | None = None  # set: turn k samples with seed (sample_seed + k), whatever else is batched
    deadline: float | None = None  # monotonic end of the whole episode, queueing included (None: from its start)
    hedge: bool = False  # the hedged copy of a stalled episode
    avoid: tuple[str, ...] = ()  # places (sandbox ids) its env must not be opened on

    @property
    def attempt_key(self) -> AttemptKey:
        return (self.episode_id, self.hedge)


class GenerationGate:
    """Lets the scheduler suspend generation (to update weights) and wait until none is in flight."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.in_flight = 0

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a generation slot (waits while suspended)."""
        await self._open.wait()
        self.in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.set()

    async def suspend(self) -> None:
        """Stop new generations and wait for those in flight to end."""
        self._open.clear()
        await self._idle.wait()

    def resume(self) -> None:
        self._open.set()

    @property
    def suspended(self) -> bool:
        return not self._open.is_set()


class _OpenTicket:
    """Hands an env whose open was abandoned (timeout, cancellation) back exactly once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.abandoned = False
        self.released = False

    def release_once(self, fut: cf.Future[Any], release: Callable[[Any], None]) -> None:
        if not self.released and not fut.cancelled() and fut.exception() is None:
            self.released = True
            release(fut.result())


async def _call(fn: Callable[[], Any]) -> Any:
    """Run a cheap, non-blocking call inside a boundary."""
    return fn()


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
    ``done``: answers not handed back yet (see :meth:`_EnvCalls._work`)."""

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


class _EnvCalls:
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


class _MemoTokenizer:
    """The engine's tokenizer with prompt rendering, encoding and (short) decoding memoised
    (bounded), everything else passed through.

    Prompts and responses repeat across episodes (the same observation, the same answer); a
    repeated one costs a dict lookup instead of a template render and an encode, or a decode.
    Templates that read the clock (``strftime_now``) are never memoised. A fast tokenizer encodes
    one text with its Rust backend's ``encode`` (the same ids; the ``encode_batch`` that
    ``PreTrainedTokenizerFast.encode`` calls wakes a thread pool, which costs milliseconds on a busy
    machine) unless truncation or padding is set on the backend.
    """

    SIZE = 8192
    MAX_TEXT = 4096

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer
        self._renders: dict[tuple[tuple[str, str], ...], str] = {}
        self._encodes: dict[str, list[int]] = {}
        self._decodes: dict[tuple[tuple[int, ...], bool], str] = {}
        self._clock = "strftime_now" in str(getattr(tokenizer, "chat_template", "") or "")
        self._backend = getattr(tokenizer, "backend_tokenizer", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tok, name)

    def apply_chat_template(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        if self._clock or kwargs != {"tokenize": False, "add_generation_prompt": True} or len(messages) > 3:
            return self._tok.apply_chat_template(messages, **kwargs)
        key = tuple((m["role"], m["content"]) for m in messages if len(m) == 2)
        if len(key) != len(messages):
            return self._tok.apply_chat_template(messages, **kwargs)
        text = self._renders.get(key)
        if text is None:
            text = self._tok.apply_chat_template(messages, **kwargs)
            if len(self._renders) >= self.SIZE:
                self._renders.clear()
            self._renders[key] = text
        return text

    def decode(self, token_ids: list[int], skip_special_tokens: bool = False, **kwargs: Any) -> str:
        if kwargs or len(token_ids) > 64:
            return self._tok.decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)
        key = (tuple(token_ids), skip_special_tokens)
        text = self._decodes.get(key)
        if text is None:
            text = self._tok.decode(token_ids, skip_special_tokens=skip_special_tokens)
            if len(self._decodes) >= self.SIZE:
                self._decodes.clear()
            self._decodes[key] = text
        return text

    def encode(self, text: str, add_special_tokens: bool = True, **kwargs: Any) -> list[int]:
        if add_special_tokens or kwargs:
            return self._tok.encode(text, add_special_tokens=add_special_tokens, **kwargs)
        ids = self._encodes.get(text)
        if ids is None:
            backend = self._backend
            if backend is not None and backend.truncation is None and backend.padding is None:
                ids = list(backend.encode(text, add_special_tokens=False).ids)
            else:
                ids = list(self._tok.encode(text, add_special_tokens=False))
            if len(text) > self.MAX_TEXT:
                return ids
            if len(self._encodes) >= self.SIZE:
                self._encodes.clear()
            self._encodes[text] = ids
        return list(ids)


def default_reward(traj: Trajectory) -> float:
    """The sum of the env's rewards over the episode."""
    return traj.total_reward


class EnvManager:
    """Plays episodes (see the module docstring).

    Args:
        engine: the LLM engine (its ``tokenizer`` builds prompts and decodes responses).
        source: where envs come from.
        config: how episodes are played.
        executor: thread pool for blocking env calls (None: a private one with ``threads`` threads);
            opens always run in a private pool of ``threads`` threads.
        threads: size of the private pool (one thread per env call in flight; a hung call holds one).
        reward_fn: final reward of a finished episode, a function or an ``async def`` (default: sum of
            env rewards); computed in :attr:`reward_pool`.
        gate: suspend/resume point before each generation (None: always open).
    """

    def __init__(
        self,
        engine: LLMEngine,
        source: EnvSource,
        config: EpisodeConfig | None = None,
        *,
        executor: cf.ThreadPoolExecutor | None = None,
        threads: int = 64,
        reward_fn: RewardFn | None = None,
        gate: GenerationGate | None = None,
    ) -> None:
        self.engine = engine
        self.source = source
        self.config = config or EpisodeConfig()
        self._own_executor = executor is None
        self.executor = executor or cf.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="env")
        self.open_executor = cf.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="env-open")
        self.reward_fn = reward_fn or default_reward
        self.gate = gate
        self.pending_closes: set[cf.Future[Any]] = set()
        self.pending_opens: set[cf.Future[Any]] = set()
        #: infra failures seen so far, by stage (retried ones and those of later-cancelled episodes too)
        self.failures: Counter[str] = Counter()
        #: seconds spent waiting on the engine, on env steps and on rewards: summed over episodes when they
        #: play on their own, round wall time in lock-step (so their ratio is the split of rollout time)
        self.busy: Counter[str] = Counter()
        self.reward_pool = RewardPool(
            self.config.reward_workers, timeout_s=self.config.reward_timeout_s, inline=(default_reward,)
        )
        adaptive = self.config.adaptive_reward_timeout
        #: per-task test-run timeouts (None: the envs' own limits)
        self.reward_timeouts = (
            AdaptiveTimeouts(adaptive.t_min_s, adaptive.lam, adaptive.t_max_s) if adaptive is not None else None
        )
        self.deadlines = Deadlines()
        self.watch = CallWatch()  # running env calls and their places, for hedging
        self._calls = _EnvCalls(source, self.executor)
        self._tokenizer: _MemoTokenizer | None = None

    # ------------------------------------------------------------ threads
    def _release(self, env: TextEnvProtocol, reusable: bool = False) -> None:
        """Give ``env`` back in the background (never blocks the event loop, survives
        cancellation); ``reusable``: the attempt ended cleanly (see :meth:`EnvSource.give_back`)."""
        give_back = getattr(self.source, "give_back", None)
        if give_back is None:  # a duck-typed source: open/close only

            def give_back(env: TextEnvProtocol, reusable: bool) -> None:
                self.source.close(env)

        try:
            fut = self.executor.submit(give_back, env, reusable=reusable)
        except RuntimeError:  # the pool is shut down: give it back right here
            give_back(env, reusable=reusable)
            return
        self.pending_closes.add(fut)
        fut.add_done_callback(self.pending_closes.discard)

    async def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until every env given back is closed; False when some did not close in time."""
        return await await_until(lambda: not (self.pending_opens or self.pending_closes), timeout_s)

    def reward_counts(self) -> Counter[str]:
        """Counters of the reward path so far, the pool's and the adaptive timeouts' (a batch's are the
        difference of two; :func:`~rockroll.agentrl.reward_pool.reward_metrics` turns them into metrics)."""
        counts = self.reward_pool.snapshot()
        if self.reward_timeouts is not None:
            counts.update(self.reward_timeouts.snapshot())
        return counts

    def shutdown(self) -> None:
        """Stop the private thread pool (waits for running env calls); close the envs the source
        keeps for reuse; stop the reward pool (a reward still running finishes on its own)."""
        self.reward_pool.shutdown()
        self.open_executor.shutdown(wait=True, cancel_futures=False)
        if self._own_executor:
            self.executor.shutdown(wait=True, cancel_futures=False)
        release = getattr(self.source, "release_idle", None)
        if release is not None:
            release()

    # ------------------------------------------------------------ episode
    async def run(self, ep: EpisodeSpec) -> Trajectory:
        """Play ``ep`` to the end; infra failures are retried or masked, never raised."""
        cfg = self.config
        start = time.monotonic()
        deadline = start + cfg.episode_timeout_s
        if ep.deadline is not None:  # set at launch: the time queued for a slot counts
            deadline = min(deadline, ep.deadline)
        # a fresh env per attempt: a step is never replayed on the env that failed
        async for attempt in Backoff(attempts=cfg.max_retries + 1, deadline=deadline):
            traj = Trajectory(ep.episode_id, ep.group_id, ep.env_id, ep.seed, env_tag=ep.env_tag)
            traj.infra_retries = attempt
            try:
                await self._attempt(ep, traj, deadline)
                break
            except InfraFailure as f:
                self.failures[f.stage] += 1
                traj.failure = FailureTag("infra", f.stage, f.error, f.message, retries=attempt)
                log.info(
                    "episode %s, attempt %d: infra failure in %s: %s: %s",
                    ep.episode_id,
                    attempt,
                    f.stage,
                    f.error,
                    f.message[:200],
                )
                if f.stage == "reward":  # a broken reward function fails the same way on a replay
                    break
        traj.wall_time_s = time.monotonic() - start
        return traj

    def _left(self, deadline: float, stage_timeout: float) -> float:
        return min(stage_timeout, deadline - time.monotonic())

    async def _bounded(self, stage: str, awaitable: Awaitable[T], timeout_s: float) -> T:
        """:func:`~rockroll.agentrl.errors.boundary` with its timeout kept by :attr:`deadlines`."""
        if timeout_s <= 0:
            if isinstance(awaitable, asyncio.Future):
                awaitable.cancel()  # a queued env call is then never run
            return await boundary(stage, awaitable, timeout_s)  # raises: the episode deadline passed
        try:
            with self.deadlines.within(timeout_s):
                return await boundary(stage, awaitable, None)
        except TimeoutError as e:
            raise InfraFailure(stage, e, f"no answer within {timeout_s:.3g}s") from e

    def _prompt_tokenizer(self) -> _MemoTokenizer:
        tok = self.engine.tokenizer
        if self._tokenizer is None or self._tokenizer._tok is not tok:
            self._tokenizer = _MemoTokenizer(tok)
        return self._tokenizer

    async def _open(self, ep: EpisodeSpec, deadline: float) -> TextEnvProtocol:
        # a hedged copy goes away from the stalled one's place (avoid); a group's envs spread over places
        fut = self.open_executor.submit(self.source.open, ep.env_id, ep.env_kwargs, avoid=ep.avoid, group=ep.group_id)
        self.pending_opens.add(fut)
        ticket = _OpenTicket()

        def opened(f: cf.Future[Any]) -> None:
            with ticket.lock:
                if ticket.abandoned:
                    ticket.release_once(f, self._release)
            self.pending_opens.discard(f)

        fut.add_done_callback(opened)
        try:
            timeout = self._left(deadline, self.config.start_timeout_s)
            return await boundary("sandbox_start", asyncio.wrap_future(fut), timeout)
        except BaseException:
            # the open may still succeed later in its thread: that env is given back when it does
            with ticket.lock:
                ticket.abandoned = True
                if fut.done():
                    ticket.release_once(fut, self._release)
            raise

    async def _attempt(self, ep: EpisodeSpec, traj: Trajectory, deadline: float) -> None:
        cfg = self.config
        env = await self._open(ep, deadline)
        clean = False  # no infra failure, no cancellation, no env call left running: the env may be reused
        self.watch.where[ep.attempt_key] = self.source.location(env) if hasattr(self.source, "location") else None
        options = self._reset_options(ep)
        reset_arg = ep.seed if options is None else (ep.seed, options)
        try:
            with self.watch.call(ep.attempt_key, ep.env_id):
                obs, info = await self._bounded(
                    "env_reset",
                    self._calls.call(env, ep.env_id, "reset", reset_arg),
                    self._left(deadline, cfg.step_timeout_s),
                )
            system = await boundary("env_reset", _call(env.system_prompt), None)  # cached by every source
            system = system if cfg.system_prompt == "env" else ""
            obs = format_observation(obs, cfg.observation_format)
            builder = PromptBuilder(
                self._prompt_tokenizer(),
                system,
                history=cfg.history,  # type: ignore[arg-type]
                last_k=cfg.history_k,
                max_context_tokens=cfg.max_context_tokens,
                max_new_tokens=cfg.max_tokens_per_turn,
            )
            try:
                prompt = builder.first_prompt(obs)
                await self._play(ep, traj, env, builder, prompt, deadline)
            except ContextExceeded as e:
                traj.failure = FailureTag("agent", "generation", "ContextExceeded", str(e))
                traj.truncated = True
            clean = True
        finally:
            self.watch.forget(ep.attempt_key)
            self._release(env, reusable=clean)
        if options is not None and self.reward_timeouts is not None:
            self.reward_timeouts.episode_ended(ep.env_tag or ep.env_id, ep.seed, info, traj.last_info)
        started = time.monotonic()
        try:  # off the event loop; raises InfraFailure("reward", ...)
            traj.final_reward = await self.reward_pool.score(self.reward_fn, traj)
        finally:
            self._count_reward(time.monotonic() - started)

    def _reset_options(self, ep: EpisodeSpec) -> dict[str, Any] | None:
        """The reset options ``ep`` carries: the per-task test-run timeouts (None: off for its env)."""
        adaptive = self.config.adaptive_reward_timeout
        if self.reward_timeouts is None or adaptive is None or not adaptive.applies(ep.env_id):
            return None
        return self.reward_timeouts.reset_options(ep.env_tag or ep.env_id)

    def _count_reward(self, waited_s: float) -> None:
        """Count one episode's wait for its reward in :attr:`busy` (summed over episodes)."""
        self.busy["reward"] += waited_s

    async def _play(
        self,
        ep: EpisodeSpec,
        traj: Trajectory,
        env: TextEnvProtocol,
        builder: PromptBuilder,
        prompt: list[int],
        deadline: float,
    ) -> None:
        cfg = self.config
        invalid_run = 0
        for turn_index in range(cfg.max_turns):
            state_key = builder.pending_obs
            request = self._request(ep, prompt, turn_index)
            t0 = time.monotonic()
            async with self.gate.slot() if self.gate is not None else contextlib.nullcontext():
                result = await self._bounded(
                    "generation", self.engine.generate(request), self._left(deadline, cfg.generation_timeout_s)
                )
            text = builder.add_response(result.token_ids)
            t1 = time.monotonic()
            with self.watch.call(ep.attempt_key, ep.env_id):
                step = await self._bounded(
                    "env_step", self._calls.call(env, ep.env_id, "step", text), self._left(deadline, cfg.step_timeout_s)
                )
            self.busy["generation"] += t1 - t0
            self.busy["env"] += time.monotonic() - t1
            invalid_run, done = self._record(traj, prompt, result, text, step, state_key, invalid_run)
            if done:
                return
            if turn_index + 1 < cfg.max_turns:
                prompt = builder.next_prompt(format_observation(step[0], cfg.observation_format))
        traj.truncated = True

    def _request(self, ep: EpisodeSpec, prompt: list[int], turn_index: int) -> GenerationRequest:
        """The generation request of turn ``turn_index`` (seeded from ``ep.sample_seed`` when set)."""
        cfg = self.config
        seed = None if ep.sample_seed is None else (ep.sample_seed + turn_index) % 2**62
        params = SamplingParams(
            max_new_tokens=cfg.max_tokens_per_turn, temperature=cfg.temperature, top_p=cfg.top_p, seed=seed
        )
        return GenerationRequest(prompt, params, request_id=f"{ep.episode_id}/{turn_index}")

    def _record(
        self,
        traj: Trajectory,
        prompt: list[int],
        result: GenerationResult,
        text: str,
        step: tuple[Any, ...],
        state_key: str,
        invalid_run: int,
    ) -> tuple[int, bool]:
        """Append the turn to ``traj``; the run of invalid actions so far and whether the episode ended
        (terminated, truncated, or ``max_invalid_actions`` in a row)."""
        cfg = self.config
        obs, reward, terminated, truncated, info = step
        traj.turns.append(
            Turn(
                prompt_ids=prompt,
                response_ids=list(result.token_ids),
                logprobs=list(result.logprobs),
                weight_version=result.weight_version,
                action_text=text,
                observation=obs,
                reward=float(reward),
                action_is_valid=bool(info.get("action_is_valid", True)),
                action_is_effective=bool(info.get("action_is_effective", False)),
                finish_reason=result.finish_reason,
                state_key=state_key,
            )
        )
        traj.success = bool(info.get("success", False))
        traj.last_info = info
        if terminated or truncated:
            traj.terminated, traj.truncated = bool(terminated), bool(truncated)
            return invalid_run, True
        invalid_run = 0 if traj.turns[-1].action_is_valid else invalid_run + 1
        if cfg.max_invalid_actions is not None and invalid_run >= cfg.max_invalid_actions:
            message = f"{invalid_run} invalid actions in a row (max_invalid_actions)"
            traj.failure = FailureTag("agent", "env_step", "InvalidActions", message)
            traj.truncated = True
            return invalid_run, True
        return invalid_run, False
