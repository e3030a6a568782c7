"""Lock-step turns: every live episode's turn generated in one batch, the round's env steps together.

:class:`LockstepEnvManager` is an :class:`~rockroll.agentrl.rollout.env_manager.EnvManager` whose episodes
still open, reset, retry, mask and score one by one (the same code), but whose turns are played in
rounds by one driver task: the prompts of all episodes waiting for a turn go to the engine in one
:meth:`~rockroll.agentrl.engines.base.LLMEngine.generate_batch` (the hf engine decodes that as one
round, :mod:`rockroll.agentrl.engines.hf_batch`), and their env steps are made in one event-loop
iteration, so the env-call batching of the manager sends them as one job per sandbox. A turn then
costs no coroutine switch, engine queue or event-loop hand-off of its own, which is most of what a
turn of a tiny model costs the per-episode path. An episode whose reset ends mid-round joins the next.

The trade: a round waits for its slowest env step and its longest response, and the hf batch path
uses no prefix cache. That suits fully observed envs with short turns (``history_k: 0``: the
prompt is the current state); long conversations and envs with long-tailed step times are better
served by the per-episode path, where a slow episode holds up only itself.

Faults are the per-episode path's: a generation timeout fails the round's episodes, an engine
error fails the episodes whose requests fail when asked again one by one, an env step that raises
or times out fails its episode, each as an
:class:`~rockroll.agentrl.errors.InfraFailure` in that episode's own coroutine (retried on a fresh
env, then masked); a context overflow truncates the episode as the agent's failure. The gate of the
scheduler (weight updates) is held for each round's generation.

Rewards are the per-episode path's too: each episode's coroutine scores itself in the manager's
:class:`~rockroll.agentrl.rewards.pool.RewardPool`, off the event loop, so rewards overlap the rounds;
``busy["reward"]`` counts the wall time with at least one reward in flight (the rounds' stages are
counted in wall time as well).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from rockroll.agentrl.engines.base import GenerationRequest
from rockroll.agentrl.engines.chat_mode import is_chat_engine
from rockroll.agentrl.errors import FatalRolloutError, InfraFailure, boundary
from rockroll.agentrl.models.chat import ContextExceeded, PromptBuilder
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
from rockroll.agentrl.trajectory import Trajectory
from rockroll.envs.core import TextEnvProtocol

__all__ = ["LockstepEnvManager", "make_env_manager"]


@dataclass(eq=False)
class _Live:
    """An episode between turns: what its next turn needs, and the future its coroutine awaits."""

    ep: EpisodeSpec
    traj: Trajectory
    env: TextEnvProtocol
    builder: PromptBuilder
    prompt: list[int]
    deadline: float
    done: asyncio.Future[None]
    turn: int = 0
    invalid_run: int = 0
    state_key: str = field(default="")


class LockstepEnvManager(EnvManager):
    """Plays episodes' turns in lock-step rounds (see the module docstring); same arguments as
    :class:`~rockroll.agentrl.rollout.env_manager.EnvManager`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting: list[_Live] = []
        self._driver: asyncio.Task[None] | None = None
        #: rounds played and turns generated in them (turns / rounds: the mean batch)
        self.rounds = 0
        self.round_turns = 0

    async def _play(
        self,
        ep: EpisodeSpec,
        traj: Trajectory,
        env: TextEnvProtocol,
        builder: PromptBuilder,
        prompt: list[int],
        deadline: float,
    ) -> None:
        live = _Live(ep, traj, env, builder, prompt, deadline, asyncio.get_running_loop().create_future())
        self._waiting.append(live)
        if self._driver is None or self._driver.done():
            self._driver = asyncio.create_task(self._drive(), name="lockstep-driver")
        await live.done  # cancelled (a straggler of a redundant group): the driver drops it next round

    async def _drive(self) -> None:
        while self._waiting:
            await asyncio.sleep(0)  # episodes whose reset just ended join this round
            batch = [w for w in self._waiting if not w.done.done()]
            self._waiting = []
            if batch:
                try:
                    await self._round(batch)
                except Exception as e:  # noqa: BLE001 - a bug: its episodes raise it (never hang, never masked)
                    for w in batch:
                        _fail(w, e)

    async def _generate(self, requests: list[GenerationRequest], timeout: float) -> list[Any]:
        """Each request's result or its error (:class:`InfraFailure` / :class:`FatalRolloutError`).

        One ``generate_batch``; when it fails for another reason than time, the requests are asked
        again one by one, so an error that belongs to one request (a served engine's 503 for one of
        them) fails its episode alone, as on the per-episode path.
        """
        try:
            return list(await boundary("generation", self.engine.generate_batch(requests), timeout))
        except FatalRolloutError as f:
            return [f] * len(requests)
        except InfraFailure as f:
            if isinstance(f.cause, TimeoutError) or f.cause is None:
                return [f] * len(requests)
        one_by_one = [boundary("generation", self.engine.generate(r), timeout) for r in requests]
        return list(await asyncio.gather(*one_by_one, return_exceptions=True))

    async def _round(self, batch: list[_Live]) -> None:
        cfg = self.config
        now = time.monotonic()
        late = [w for w in batch if w.deadline <= now]
        for w in late:
            _fail(w, InfraFailure("generation", None, "the episode deadline passed"))
        batch = [w for w in batch if w.deadline > now]
        if not batch:
            return
        for w in batch:
            w.state_key = w.builder.pending_obs
        requests = [self._request(w.ep, w.prompt, w.turn) for w in batch]
        timeout = min(cfg.generation_timeout_s, max(w.deadline for w in batch) - now)
        async with self.gate.slot() if self.gate is not None else contextlib.nullcontext():
            answers = await self._generate(requests, timeout)
        self.busy["generation"] += time.monotonic() - now
        for w, answer in zip(batch, answers, strict=True):
            if isinstance(answer, BaseException):
                _fail(w, answer)
        pairs = [(w, a) for w, a in zip(batch, answers, strict=True) if not isinstance(a, BaseException)]
        if not pairs:
            return
        batch, results = [w for w, _ in pairs], [a for _, a in pairs]
        self.rounds += 1
        self.round_turns += len(batch)
        actions = [w.builder.add_response(r.token_ids) for w, r in zip(batch, results, strict=True)]
        texts = [w.builder.last_text for w in batch]
        # made in one event-loop iteration: the manager batches them per sandbox (one job per batch key)
        calls = [self._calls.call(w.env, w.ep.env_id, "step", a) for w, a in zip(batch, actions, strict=True)]
        step_timeout = min(cfg.step_timeout_s, max(w.deadline for w in batch) - time.monotonic())
        t_env = time.monotonic()
        await asyncio.wait(calls, timeout=max(step_timeout, 0.0))
        self.busy["env"] += time.monotonic() - t_env
        for w, result, text, call in zip(batch, results, texts, calls, strict=True):
            if w.done.done():  # cancelled meanwhile
                call.cancel()
                continue
            if not call.done():
                call.cancel()
                _fail(w, InfraFailure("env_step", TimeoutError(), f"no answer within {step_timeout:.3g}s"))
                continue
            try:
                step = await boundary("env_step", call, None)  # done: its answer, or its error classified
            except (InfraFailure, FatalRolloutError) as f:
                _fail(w, f)
                continue
            w.invalid_run, ended = self._record(w.traj, w.prompt, result, text, step, w.state_key, w.invalid_run)
            w.turn += 1
            if not ended and w.turn >= cfg.max_turns:
                w.traj.truncated = ended = True
            if ended:
                w.done.set_result(None)
                continue
            try:
                w.prompt = w.builder.after_step(step, cfg.observation_format)
            except ContextExceeded as e:
                w.done.set_exception(e)  # the episode's coroutine marks it truncated (the agent's failure)
                continue
            self._waiting.append(w)

    def _count_reward(self, waited_s: float) -> None:
        """Rewards overlap each other and the rounds: count wall time with one in flight, like the rounds'."""
        self.busy["reward"] = self.reward_pool.wall_s


def _fail(w: _Live, error: BaseException) -> None:
    if not w.done.done():
        w.done.set_exception(error)


def make_env_manager(engine: Any, source: Any, config: EpisodeConfig | None = None, **kwargs: Any) -> EnvManager:
    """The env manager ``config`` asks for: :class:`LockstepEnvManager` with ``lockstep``, else :class:`EnvManager`."""
    lockstep = config is not None and config.lockstep and not is_chat_engine(engine)  # a chat server: per episode
    cls = LockstepEnvManager if lockstep else EnvManager
    return cls(engine, source, config, **kwargs)
