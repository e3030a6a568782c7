"""Env managers: play one env for whole episodes with an LLM engine, producing :class:`Trajectory`.

:meth:`EnvManager.run` plays one episode: open an env from the :class:`~rockroll.agentrl.env_source.EnvSource`
(``sandbox_start``), ``reset`` on the episode's seed, then per turn build the prompt
(:class:`~rockroll.agentrl.chat.PromptBuilder`), ``generate`` (at most ``max_tokens_per_turn``), ``step`` the
env with the response text, until ``terminated``, ``truncated`` or ``max_turns``; then compute the
reward. Every stage runs in :func:`~rockroll.agentrl.errors.boundary`: an infra failure restarts the episode
on a fresh env while the per-episode deadline (which includes sandbox start) and ``max_retries``
allow, else the trajectory comes back masked with a ``FailureTag(kind="infra")``.

Blocking env calls run in a thread pool; a call that times out leaves its thread to finish on its
own, and its env is closed in the background. Opens run in a pool of their own: an open may block
for long (a full sandbox pool is backpressure), and if opens could take every thread, the steps and
closes that free session slots would queue behind them for ever. Envs are always given back, also when the episode is
cancelled (a straggler of a redundant group): :meth:`EnvManager.drain` waits for those closes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from rockroll.agentrl.chat import ContextExceeded, PromptBuilder, format_observation
from rockroll.agentrl.config import EpisodeConfig
from rockroll.agentrl.engines.base import GenerationRequest, LLMEngine, SamplingParams
from rockroll.agentrl.env_source import EnvSource
from rockroll.agentrl.errors import InfraFailure, boundary
from rockroll.agentrl.trajectory import FailureTag, Trajectory, Turn
from rockroll.envs.core import TextEnvProtocol
from rockroll.sandbox.retry import Backoff, await_until

__all__ = ["EnvManager", "EpisodeSpec", "GenerationGate", "RewardFn"]

RewardFn = Callable[[Trajectory], float]


@dataclass
class EpisodeSpec:
    """Which episode to play."""

    env_id: str
    seed: int
    group_id: str = "g0"
    episode_id: str = "g0/0"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    env_tag: str = ""


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
        reward_fn: final reward of a finished episode (default: sum of env rewards).
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

    # ------------------------------------------------------------ threads
    def _submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        return asyncio.wrap_future(self.executor.submit(fn, *args))

    def _release(self, env: TextEnvProtocol) -> None:
        """Close ``env`` in the background (never blocks the event loop, survives cancellation)."""
        try:
            fut = self.executor.submit(self.source.close, env)
        except RuntimeError:  # the pool is shut down: close right here
            self.source.close(env)
            return
        self.pending_closes.add(fut)
        fut.add_done_callback(self.pending_closes.discard)

    async def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until every env given back is closed; False when some did not close in time."""
        return await await_until(lambda: not (self.pending_opens or self.pending_closes), timeout_s)

    def shutdown(self) -> None:
        """Stop the private thread pool (waits for running env calls)."""
        self.open_executor.shutdown(wait=True, cancel_futures=False)
        if self._own_executor:
            self.executor.shutdown(wait=True, cancel_futures=False)

    # ------------------------------------------------------------ episode
    async def run(self, ep: EpisodeSpec) -> Trajectory:
        """Play ``ep`` to the end; infra failures are retried or masked, never raised."""
        cfg = self.config
        start = time.monotonic()
        deadline = start + cfg.episode_timeout_s
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
                if f.stage == "reward":  # a broken reward function fails the same way on a replay
                    break
        traj.wall_time_s = time.monotonic() - start
        return traj

    def _left(self, deadline: float, stage_timeout: float) -> float:
        return min(stage_timeout, deadline - time.monotonic())

    async def _open(self, ep: EpisodeSpec, deadline: float) -> TextEnvProtocol:
        fut = self.open_executor.submit(self.source.open, ep.env_id, ep.env_kwargs)
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
        try:
            obs, _info = await boundary(
                "env_reset", self._submit(lambda: env.reset(seed=ep.seed)), self._left(deadline, cfg.step_timeout_s)
            )
            system = await boundary("env_reset", _call(env.system_prompt), None)  # cached by every source
            system = system if cfg.system_prompt == "env" else ""
            obs = format_observation(obs, cfg.observation_format)
            builder = PromptBuilder(
                self.engine.tokenizer,
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
        finally:
            self._release(env)
        try:
            traj.final_reward = float(self.reward_fn(traj))
        except Exception as e:  # noqa: BLE001 - a broken reward function is infra, not the agent
            raise InfraFailure("reward", e) from e

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
        params = SamplingParams(max_new_tokens=cfg.max_tokens_per_turn, temperature=cfg.temperature, top_p=cfg.top_p)
        invalid_run = 0
        for turn_index in range(cfg.max_turns):
            state_key = builder.pending_obs
            request = GenerationRequest(prompt, params, request_id=f"{ep.episode_id}/{turn_index}")
            async with self.gate.slot() if self.gate is not None else contextlib.nullcontext():
                result = await boundary(
                    "generation", self.engine.generate(request), self._left(deadline, cfg.generation_timeout_s)
                )
            text = builder.add_response(result.token_ids)
            step = await boundary("env_step", self._submit(env.step, text), self._left(deadline, cfg.step_timeout_s))
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
            if terminated or truncated:
                traj.terminated, traj.truncated = bool(terminated), bool(truncated)
                return
            invalid_run = 0 if traj.turns[-1].action_is_valid else invalid_run + 1
            if cfg.max_invalid_actions is not None and invalid_run >= cfg.max_invalid_actions:
                message = f"{invalid_run} invalid actions in a row (max_invalid_actions)"
                traj.failure = FailureTag("agent", "env_step", "InvalidActions", message)
                traj.truncated = True
                return
            if turn_index + 1 < cfg.max_turns:
                prompt = builder.next_prompt(format_observation(obs, cfg.observation_format))
        traj.truncated = True
