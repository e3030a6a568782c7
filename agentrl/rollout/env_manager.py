"""Env managers: play one env for whole episodes with an LLM engine, producing :class:`Trajectory`.

:meth:`EnvManager.run` plays one episode: open an env from the :class:`~rockroll.agentrl.sources.kinds.EnvSource`
(``sandbox_start``), ``reset`` on the episode's seed, then per turn build the prompt
(:class:`~rockroll.agentrl.models.chat.PromptBuilder`), ``generate`` (at most ``max_tokens_per_turn``), ``step`` the
env with the response text, until ``terminated``, ``truncated`` or ``max_turns``; then compute the
reward. Every stage runs in :func:`~rockroll.agentrl.errors.boundary`: an infra failure restarts the episode
on a fresh env while the per-episode deadline (which includes sandbox start) and ``max_retries``
allow, else the trajectory comes back masked with a ``FailureTag(kind="infra")``.

The reward runs off the event loop, in a :class:`~rockroll.agentrl.rewards.pool.RewardPool` of its
own (``reward_workers``, ``reward_timeout_s``), so a slow reward (a judge, a test run) overlaps the
other episodes' generation and env steps. With ``adaptive_reward_timeout`` each reset carries the
option ``test_timeouts`` (per task) from :class:`~rockroll.agentrl.rewards.adaptive_timeout.AdaptiveTimeouts`,
told the episode's test run when it ends.

Blocking env calls run in a thread pool; a call that times out leaves its thread to finish on its
own, and its env is closed in the background. An env whose attempt ended cleanly is given back as
reusable (:meth:`~rockroll.agentrl.sources.kinds.EnvSource.give_back`): a sandbox source keeps the
session for the next episode instead of closing it and opening a new one. Opens run in a pool of
their own: an open may block for long (a full sandbox pool is backpressure), and if opens could
take every thread, the steps and closes that free session slots would queue behind them for ever.
Envs are always given back, also when the episode is cancelled (a straggler of a redundant group):
:meth:`EnvManager.drain` waits for those closes.

What a turn costs the event loop is kept small, since at a few thousand turns per second it is the
limit (the engine's batching thread needs the interpreter too):

* Resets and steps made at the same moment are handed to the source together
  (:class:`~rockroll.agentrl.sources.calls.EnvCalls`: one worker-thread job per batch key, one round
  trip per sandbox).
* Timeouts are kept by one periodic check (:class:`~rockroll.agentrl.rollout.deadlines.Deadlines`), not a
  timer (and a task) per call.
* The chat template, the encoding of a prompt and the decoding of a short response are memoised
  across episodes (:class:`~rockroll.agentrl.models.memo_tokenizer.MemoTokenizer`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rockroll.agentrl.engines.base import GenerationRequest, GenerationResult, LLMEngine, SamplingParams
from rockroll.agentrl.engines.chat_mode import is_chat_engine
from rockroll.agentrl.errors import InfraFailure, boundary
from rockroll.agentrl.models.chat import ContextExceeded, PromptBuilder, format_observation
from rockroll.agentrl.models.memo_tokenizer import MemoTokenizer
from rockroll.agentrl.rewards.adaptive_timeout import AdaptiveTimeouts
from rockroll.agentrl.rewards.pool import RewardFn, RewardPool
from rockroll.agentrl.rollout.answers import Restriction, check_engine, restriction
from rockroll.agentrl.rollout.builders import chat_result, make_builder, tool_counts
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.rollout.deadlines import Deadlines
from rockroll.agentrl.rollout.gate import GenerationGate
from rockroll.agentrl.rollout.handles import EnvHandling
from rockroll.agentrl.rollout.hedging import AttemptKey, CallWatch
from rockroll.agentrl.sources.calls import EnvCalls
from rockroll.agentrl.sources.kinds import EnvSource
from rockroll.agentrl.trajectory import FailureTag, Trajectory, Turn
from rockroll.envs.action_wire import tools_of
from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.tools import Tool
from rockroll.sandbox.retry import Backoff

log = logging.getLogger(__name__)

__all__ = ["EnvManager", "EpisodeSpec", "RewardFn", "default_reward"]

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


async def _call(fn: Callable[[], Any]) -> Any:
    """Run a cheap, non-blocking call inside a boundary."""
    return fn()


def default_reward(traj: Trajectory) -> float:
    """The sum of the env's rewards over the episode."""
    return traj.total_reward


class EnvManager(EnvHandling):
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
        check_engine(engine, self.config)  # restrict_tool_calls with an engine that cannot restrict: an error
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
        self._calls = EnvCalls(source, self.executor)
        self._tokenizer: MemoTokenizer | None = None
        self._tries: dict[str, Restriction | None] = {}  # env id -> what its turns may sample (rollout/answers.py)
        self._env_tool_sets: dict[str, tuple[Tool, ...]] = {}  # env id -> the tools it declares

    # ------------------------------------------------------------ rewards
    def reward_counts(self) -> Counter[str]:
        """Counters of the reward path so far, the pool's and the adaptive timeouts' (a batch's are the
        difference of two; :func:`~rockroll.agentrl.rewards.pool.reward_metrics` turns them into metrics)."""
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
        self.source.release_idle()

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

    def _prompt_tokenizer(self) -> MemoTokenizer:
        tok = self.engine.tokenizer
        if self._tokenizer is None or self._tokenizer._tok is not tok:
            self._tokenizer = MemoTokenizer(tok)
        return self._tokenizer

    async def _attempt(self, ep: EpisodeSpec, traj: Trajectory, deadline: float) -> None:
        cfg = self.config
        env = await self._open(ep, deadline)
        clean = False  # no infra failure, no cancellation, no env call left running: the env may be reused
        self.watch.where[ep.attempt_key] = self.source.location(env)
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
            tools = await self._bounded("env_reset", self._env_tools(env, ep.env_id), self._left(deadline, 60.0))
            builder = make_builder(self._prompt_tokenizer(), system, tools, cfg, chat=is_chat_engine(self.engine))
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
                if is_chat_engine(self.engine):  # a chat server renders and parses (engines/chat_mode.py)
                    tools = self._env_tool_sets.get(ep.env_id, ())
                    chat = self.engine.chat(builder.chat_messages(), tools, request.params)  # type: ignore[attr-defined]
                    reply = await self._bounded("generation", chat, self._left(deadline, cfg.generation_timeout_s))
                    result, action = chat_result(builder, reply, self._prompt_tokenizer(), self.engine.weight_version)
                else:
                    result = await self._bounded(
                        "generation", self.engine.generate(request), self._left(deadline, cfg.generation_timeout_s)
                    )
                    action = builder.add_response(result.token_ids)
            t1 = time.monotonic()
            with self.watch.call(ep.attempt_key, ep.env_id):
                step = await self._bounded(
                    "env_step",
                    self._calls.call(env, ep.env_id, "step", action),
                    self._left(deadline, cfg.step_timeout_s),
                )
            self.busy["generation"] += t1 - t0
            self.busy["env"] += time.monotonic() - t1
            invalid_run, done = self._record(traj, prompt, result, builder.last_text, step, state_key, invalid_run)
            if done:
                return
            if turn_index + 1 < cfg.max_turns:
                prompt = builder.after_step(step, cfg.observation_format)
        traj.truncated = True

    async def _env_tools(self, env: TextEnvProtocol, env_id: str) -> tuple[Tool, ...]:
        """The tools ``env_id`` declares (asked once per env id, off the event loop: a node agent's handle asks
        its agent)."""
        if env_id not in self._env_tool_sets:
            loop = asyncio.get_running_loop()
            self._env_tool_sets[env_id] = await loop.run_in_executor(self.executor, tools_of, env)
        return self._env_tool_sets[env_id]

    def _request(self, ep: EpisodeSpec, prompt: list[int], turn_index: int) -> GenerationRequest:
        """The generation request of turn ``turn_index`` (seeded from ``ep.sample_seed`` when set)."""
        cfg = self.config
        seed = None if ep.sample_seed is None else (ep.sample_seed + turn_index) % 2**62
        params = SamplingParams(
            max_new_tokens=cfg.max_tokens_per_turn, temperature=cfg.temperature, top_p=cfg.top_p, seed=seed,
            allowed=self._trie(ep.env_id),
        )  # fmt: skip
        return GenerationRequest(prompt, params, request_id=f"{ep.episode_id}/{turn_index}")

    def _trie(self, env_id: str) -> Restriction | None:
        """What a turn on ``env_id`` may sample (None: any), :func:`rockroll.agentrl.rollout.answers.restriction`
        (asked after the env's tools: a tool env's calls may be restricted)."""
        if env_id not in self._tries:
            tools = self._env_tool_sets.get(env_id, ())
            self._tries[env_id] = restriction(self.engine, env_id, self.config, tools)
        return self._tries[env_id]

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
                allowed=None if (trie := self._trie(traj.env_id)) is None else trie.positions(result.token_ids),
                tools=tool_counts(info) if self._env_tool_sets.get(traj.env_id) else None,
                tokens_exact=result.tokens_exact,
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
