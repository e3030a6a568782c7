"""Routing samples to rewards by tag: :class:`RewardRouter`, its config, outcomes and per-tag metrics.

Config (YAML maps onto :class:`RewardRouterConfig`)::

    routes:
      math:      {reward: math, options: {format_weight: 0.1}}
      code:      {reward: code, options: {sandboxes: 8, t_max_s: 10}}
      countdown: {reward: countdown}
    timeout_s: 60        # per reward call, queueing included (the reward pool's)
    max_workers: 32      # reward pool threads
    infra_retries: 1     # retries of a call that failed as infra

Each route's reward is built once (routes with the same reward and options share one instance, so
one sandbox pool serves them). A call runs on the reward pool
(:class:`~rockroll.agentrl.rewards.pool.RewardPool`): plain rewards in a thread, ``async`` ones on the
loop, within ``timeout_s``. A reward that raises, returns no number or times out gives an outcome
with ``infra=True`` (retried ``infra_retries`` times first), never a zero score: the caller masks
the sample. A tag without a route raises :class:`~rockroll.agentrl.rewards.errors.UnknownTagError`
(a config error naming the known tags) before anything is scored.

Metrics (:func:`route_metrics`) per tag: ``reward/<tag>/mean`` (over scored samples),
``reward/<tag>/count``, ``reward/<tag>/infra_failures``, ``reward/<tag>/latency_s`` (mean seconds
of a call, retries included).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from rockroll.agentrl.errors import InfraFailure
from rockroll.agentrl.rewards.base import REWARDS, ConfigModel, OneOf, Reward, RewardResult, make_reward
from rockroll.agentrl.rewards.errors import UnknownTagError
from rockroll.agentrl.rewards.pool import RewardPool
from rockroll.agentrl.rewards.samples import Sample

__all__ = ["RouteConfig", "RewardRouterConfig", "RewardOutcome", "RewardRouter", "route_metrics"]


class RouteConfig(ConfigModel):
    reward: Annotated[str, OneOf(REWARDS)] = Field(..., description="Registered reward name (math, code, judge...).")
    options: dict[str, Any] = Field(default_factory=dict, description="The reward's options (its Config).")


class RewardRouterConfig(ConfigModel):
    routes: dict[str, RouteConfig] = Field(..., min_length=1, description="Sample tag -> reward and options.")
    timeout_s: float | None = Field(60.0, gt=0, description="Most seconds of one reward call, queueing included.")
    max_workers: int | None = Field(None, ge=1, description="Reward pool threads (None: min(32, CPUs + 4)).")
    infra_retries: int = Field(0, ge=0, le=10, description="Retries of a call that failed as infra.")


@dataclass(frozen=True)
class RewardOutcome:
    """One sample's reward, or its infra failure.

    Attributes:
        tag: the sample's tag.
        score: the reward; 0.0 when ``infra`` (mask it, never train on it).
        infra: the reward failed (raised, timed out, no number): not the agent's doing.
        details: the reward's details (empty on infra).
        error: the infra failure's text (empty otherwise).
        latency_s: seconds of the call(s), retries included.
        attempts: calls made (1 + retries).
    """

    tag: str
    score: float
    infra: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    latency_s: float = 0.0
    attempts: int = 1


class _Call:
    """A reward bound to one sample, in the shape the reward pool runs (``fn(x) -> float``); keeps the result."""

    def __init__(self, reward: Reward, sample: Sample, response: str) -> None:
        self.reward, self.sample, self.response = reward, sample, response
        self.result: RewardResult | None = None

    def _keep(self, value: Any) -> Any:
        if isinstance(value, RewardResult):
            self.result = value
            return value.score
        return value  # a plain number (the pool refuses anything else, as infra)

    def __call__(self, _: Any) -> Any:
        return self._keep(self.reward(self.sample.prompt, self.response, self.sample.metadata))


class _AsyncCall(_Call):
    async def __call__(self, _: Any) -> Any:  # type: ignore[override]
        return self._keep(await self.reward(self.sample.prompt, self.response, self.sample.metadata))  # type: ignore[misc]


class RewardRouter:
    """Scores samples with the reward their tag routes to (see the module docstring).

    Args:
        config: a :class:`RewardRouterConfig` or the mapping it validates (``ConfigError`` names bad keys).
        pool: the reward pool to run on (default: one of its own, from ``timeout_s`` and ``max_workers``).
        rewards: built reward instances by tag, overriding the config's (tests, shared sandboxes).
    """

    def __init__(
        self,
        config: RewardRouterConfig | Mapping[str, Any],
        *,
        pool: RewardPool | None = None,
        rewards: Mapping[str, Reward] | None = None,
    ) -> None:
        self.config = config if isinstance(config, RewardRouterConfig) else RewardRouterConfig(**dict(config))
        self.pool = pool or RewardPool(self.config.max_workers, timeout_s=self.config.timeout_s)
        self._own_pool = pool is None
        built: dict[tuple[str, str], Reward] = {}
        self.rewards: dict[str, Reward] = {}
        for tag, route in self.config.routes.items():
            if rewards and tag in rewards:
                self.rewards[tag] = rewards[tag]
                continue
            key = (route.reward, route.model_dump_json())
            if key not in built:
                built[key] = make_reward(route.reward, route.options, key=f"routes.{tag}.options")
            self.rewards[tag] = built[key]

    # ------------------------------------------------------------ lookups
    @property
    def tags(self) -> tuple[str, ...]:
        """The routed tags, in config order."""
        return tuple(self.config.routes)

    def reward_for(self, tag: str) -> Reward:
        """The reward of ``tag``; :class:`UnknownTagError` (naming the known tags) when it has no route."""
        try:
            return self.rewards[tag]
        except (KeyError, TypeError):
            raise UnknownTagError(tag, self.tags) from None

    def required_fields(self, tag: str) -> tuple[str, ...]:
        """The metadata fields a sample of ``tag`` needs (pass as ``requires=`` to the dataset loaders)."""
        return self.reward_for(tag).required_fields()

    def check(self, samples: Sequence[Sample]) -> None:
        """Raise :class:`UnknownTagError` for the first sample whose tag has no route."""
        for s in samples:
            self.reward_for(s.tag)

    # ------------------------------------------------------------ scoring
    async def score(self, sample: Sample, response: str) -> RewardOutcome:
        """One sample's :class:`RewardOutcome`; infra failures are outcomes, not exceptions."""
        reward = self.reward_for(sample.tag)
        started, error = time.perf_counter(), ""
        for attempt in range(1, self.config.infra_retries + 2):
            call = (_AsyncCall if reward.is_async else _Call)(reward, sample, response)
            try:
                value = await self.pool.score(call, sample)  # type: ignore[arg-type]  # the call ignores it
            except InfraFailure as e:
                error = str(e)
                continue
            details = dict(call.result.details) if call.result is not None else {}
            return RewardOutcome(sample.tag, value, False, details, "", time.perf_counter() - started, attempt)
        return RewardOutcome(sample.tag, 0.0, True, {}, error, time.perf_counter() - started, attempt)

    async def score_batch(self, samples: Sequence[Sample], responses: Sequence[str]) -> list[RewardOutcome]:
        """Every sample's outcome, in order, scored concurrently (tags are checked first)."""
        if len(samples) != len(responses):
            raise ValueError(f"{len(samples)} samples but {len(responses)} responses")
        self.check(samples)
        return list(await asyncio.gather(*(self.score(s, r) for s, r in zip(samples, responses, strict=True))))

    def score_batch_sync(self, samples: Sequence[Sample], responses: Sequence[str]) -> list[RewardOutcome]:
        """:meth:`score_batch` from synchronous code (runs its own event loop)."""
        return asyncio.run(self.score_batch(samples, responses))

    def close(self) -> None:
        """Close every reward (sandboxes, clients) and the pool if it is the router's own."""
        for reward in {id(r): r for r in self.rewards.values()}.values():
            reward.close()
        if self._own_pool:
            self.pool.shutdown()

    def __enter__(self) -> RewardRouter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def route_metrics(outcomes: Sequence[RewardOutcome]) -> dict[str, float]:
    """Per-tag ``reward/<tag>/{mean,count,infra_failures,latency_s}`` of a batch (see the module docstring)."""
    by_tag: dict[str, list[RewardOutcome]] = defaultdict(list)
    for o in outcomes:
        by_tag[o.tag].append(o)
    out: dict[str, float] = {}
    for tag, items in by_tag.items():
        scored = [o.score for o in items if not o.infra]
        if scored:
            out[f"reward/{tag}/mean"] = sum(scored) / len(scored)
        out[f"reward/{tag}/count"] = float(len(items))
        out[f"reward/{tag}/infra_failures"] = float(len(items) - len(scored))
        out[f"reward/{tag}/latency_s"] = sum(o.latency_s for o in items) / len(items)
    return out
