"""The reward contract of single-turn RLVR, and :data:`REWARDS`, the registry of reward kinds.

A reward is a named, configurable function of ``(prompt, response, metadata) -> RewardResult``
(a score and details); a plain ``float`` return is accepted as the score. It is a :class:`Reward`
subclass with:

* ``Config``: a :class:`ConfigModel` of its options (every field described; unknown keys refused);
* ``requires``: the metadata fields a sample must carry for it (``("answer",)``); datasets check
  them at load time (:mod:`rockroll.agentrl.rewards.samples`);
* ``__call__``: plain (run in a thread of the reward pool, :mod:`rockroll.agentrl.rewards.pool`) or
  ``async def`` (awaited on the event loop: a judge over HTTP);
* ``close()``: frees what it holds (sandboxes, HTTP clients).

A reward that raises, returns no number, or runs past the pool's timeout is an infra failure of
the sample (:mod:`rockroll.agentrl.rewards.router`), never a zero. An answer that is wrong, badly
formatted, too slow or crashes *is* a score (0), decided by the reward.

Adding one is one class plus one registration: ``REWARDS.add("mine", MyReward)`` or
``"my_pkg.mod:MyReward"`` (imported on first use). A plain function
``fn(prompt, response, metadata) -> float | RewardResult`` registers through
:func:`register_reward`, which wraps it (no options).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rockroll.agentrl.rewards.errors import UnknownRewardError
from rockroll.envs.config import ConfigError, ConfigModel, OneOf
from rockroll.envs.registries import Registry

__all__ = [
    "REWARDS",
    "ConfigError",
    "ConfigModel",
    "NoOptions",
    "OneOf",
    "Reward",
    "RewardResult",
    "make_reward",
    "register_reward",
]


@dataclass(frozen=True)
class RewardResult:
    """One scored response.

    Attributes:
        score: the reward (a float; most built-ins give 0..1).
        details: JSON-ready facts behind it (the extracted answer, tests passed, the judge's text).
    """

    score: float
    details: dict[str, Any] = field(default_factory=dict)


class NoOptions(ConfigModel):
    """A reward without options."""


class Reward:
    """Base of every reward (see the module docstring)."""

    #: the options' model; ``Reward(config)`` receives an instance of it
    Config: ClassVar[type[ConfigModel]] = NoOptions
    #: metadata fields every sample scored by this reward must carry
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: ConfigModel | None = None) -> None:
        self.config = config if config is not None else self.Config()

    def __call__(self, prompt: str, response: str, metadata: Mapping[str, Any]) -> RewardResult | float:
        raise NotImplementedError

    def required_fields(self) -> tuple[str, ...]:
        """The metadata fields a sample needs for this reward as configured (``requires`` by default)."""
        return self.requires

    def close(self) -> None:
        """Free what the reward holds (nothing by default)."""

    @property
    def is_async(self) -> bool:
        """Whether ``__call__`` is an ``async def`` (awaited on the loop, not run in a thread)."""
        return inspect.iscoroutinefunction(type(self).__call__)


def _unknown(name: object, choices: tuple[str, ...]) -> UnknownRewardError:
    return UnknownRewardError(name, choices)


#: reward kinds by name; built-ins are lazy so naming one imports only its module
REWARDS: Registry[type[Reward]] = Registry(
    "reward",
    "reward",
    entries={
        "exact": "rockroll.agentrl.rewards.simple:ExactReward",
        "regex": "rockroll.agentrl.rewards.simple:RegexReward",
        "countdown": "rockroll.agentrl.rewards.simple:CountdownReward",
        "math": "rockroll.agentrl.rewards.math_answer:MathReward",
        "code": "rockroll.agentrl.rewards.code:CodeReward",
        "judge": "rockroll.agentrl.rewards.judge:JudgeReward",
    },
    error=_unknown,
)


def register_reward(
    name: str, fn: Callable[..., Any] | type[Reward], *, requires: tuple[str, ...] = (), override: bool = False
) -> type[Reward]:
    """Register a :class:`Reward` subclass, or wrap a plain (or ``async``) function
    ``fn(prompt, response, metadata)`` as one without options; returns the class registered."""
    if isinstance(fn, type) and issubclass(fn, Reward):
        cls = fn
    elif callable(fn):
        target = fn
        if inspect.iscoroutinefunction(target):

            async def acall(self: Reward, prompt: str, response: str, metadata: Mapping[str, Any]) -> Any:
                return await target(prompt, response, metadata)

            call: Callable[..., Any] = acall
        else:

            def call(self: Reward, prompt: str, response: str, metadata: Mapping[str, Any]) -> Any:
                return target(prompt, response, metadata)

        cls = type(f"{name}_reward", (Reward,), {"__call__": call, "requires": tuple(requires)})
    else:
        raise TypeError(f"reward {name!r}: expected a Reward subclass or a function, got {type(fn).__name__}")
    REWARDS.add(name, cls, override=override)
    return cls


def make_reward(name: str, options: Mapping[str, Any] | None = None, *, key: str = "options") -> Reward:
    """The reward ``name`` built with ``options`` validated by its ``Config``.

    Raises :class:`~rockroll.agentrl.rewards.errors.UnknownRewardError` for an unknown name and
    ``ConfigError`` naming ``key.<field>`` for bad options.
    """
    cls = REWARDS.get(name)
    try:
        config = cls.Config(**dict(options or {}))
    except ConfigError as e:
        problems = [(f"{key}.{k}" if k else key, f"{key}.{m}" if k else m) for k, m in e.problems]
        raise ConfigError(problems[0][0], problems[0][1], allowed=e.allowed, value=e.value, problems=problems) from e
    return cls(config)
