"""The text-env contract every rockroll environment follows.

A :class:`TextEnv` is a ``gymnasium.Env`` whose observations and actions are strings:

* ``reset(*, seed=None, options=None) -> (obs, info)``
* ``step(action) -> (obs, reward, terminated, truncated, info)``: ``action`` is the agent's text, or a
  turn with tool calls (:class:`~rockroll.envs.tools.ToolAction`) for an env that declares
  :attr:`TextEnv.tools` (:class:`rockroll.envs.tool_env.ToolEnv`); a text env takes a turn without calls as its text
* ``close()``
* ``get_state() -> dict`` / ``set_state(state)``: a JSON-serialisable snapshot (RNG included),
  so a session can be forked mid-episode and both copies continue independently.

The agent's text is read through :func:`parse_answer`: the content of the last
``<answer>...</answer>`` block (case-insensitive, surrounding text ignored). A missing block or an
action the env does not accept is a no-op that costs ``format_penalty`` and reports
``action_is_valid=False``. Every ``info`` carries ``action_is_valid``, ``action_is_effective`` and
``success``; every ``info`` value is JSON-serialisable. Step limits are not the env's business: :class:`rockroll.envs.wrappers.MaxSteps` owns
``truncated``.

Instructions for the agent (rules and action format) come from the env through
:meth:`TextEnv.system_prompt`, never from the trainer.

Subclasses implement the underscored hooks: ``_reset``, ``_parse_action``, ``_step``,
``_render``, ``_get_state`` and ``_set_state``.

:class:`TextEnvProtocol` states the contract as a type. Every env handle satisfies it wherever the
env runs: a :class:`TextEnv`, the :class:`~rockroll.envs.wrappers.MaxSteps` that ``envhub.make``
returns, a session in a sandbox (:class:`rockroll.sandbox.session.RemoteSession`) and a session over
HTTP (:class:`rockroll.client.remote_env.RemoteEnv`); code that only plays envs annotates with it.
"""

from __future__ import annotations

import abc
import math
import re
import string
from typing import Any, ClassVar, Generic, Protocol, TypeGuard, TypeVar, runtime_checkable

import gymnasium as gym
import numpy as np

from rockroll.envs.errors import ActionTypeError, EnvConfigError, ResetNeeded, StateError
from rockroll.envs.tools import Action, Tool, ToolAction

__all__ = [
    "finite_number",
    "TextEnv",
    "TextEnvProtocol",
    "TextSpace",
    "StepOutcome",
    "parse_answer",
    "reseed_snapshot",
    "DEFAULT_FORMAT_PENALTY",
]

DEFAULT_FORMAT_PENALTY = -0.1
STATE_FORMAT = 1
_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)

A = TypeVar("A")  # the env's parsed action type


def parse_answer(text: str) -> str | None:
    """Return the stripped content of the last ``<answer>...</answer>`` block, or None."""
    matches = _ANSWER_RE.findall(text)
    if not matches:
        return None
    last: str = matches[-1]
    return last.strip()


@runtime_checkable
class TextEnvProtocol(Protocol):
    """The text-env contract every env handle follows (see the module docstring).

    ``isinstance(env, TextEnvProtocol)`` checks that the methods exist, not their signatures.
    Handles may add more (``fork``, ``render``); code that needs those says so in its own types.
    """

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; same seed, same episode."""
        ...

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play the agent's text or tool-calling turn: ``(obs, reward, terminated, truncated, info)``."""
        ...

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The functions the agent may call (``()``: a text env)."""
        ...

    def close(self) -> None:
        """Release the env (idempotent)."""
        ...

    def get_state(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot, RNG included."""
        ...

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`."""
        ...

    def system_prompt(self) -> str:
        """Instructions for the agent: the rules, then the action format."""
        ...

    def action_candidates(self) -> list[str]:
        """Legal actions now, as answer text (empty when the env cannot list them)."""
        ...


class TextSpace(gym.spaces.Text):
    """A gymnasium ``Text`` space that accepts any string up to ``max_length`` characters.

    Sampling draws from printable ASCII; membership accepts any characters (env text uses
    symbols such as ``√``).
    """

    def __init__(self, max_length: int = 100_000) -> None:
        super().__init__(max_length, min_length=0, charset=string.printable)

    def contains(self, x: object) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length


class StepOutcome(Generic[A]):
    """What an env's ``_step`` hook returns (kept tiny; a tuple would do, names read better)."""

    __slots__ = ("observation", "reward", "terminated", "effective", "success", "info")

    def __init__(
        self,
        observation: str,
        reward: float,
        terminated: bool,
        *,
        effective: bool,
        success: bool,
        info: dict[str, Any] | None = None,
    ) -> None:
        self.observation = observation
        self.reward = float(reward)
        self.terminated = bool(terminated)
        self.effective = bool(effective)
        self.success = bool(success)
        self.info = info or {}


class TextEnv(gym.Env[str, str], abc.ABC, Generic[A]):
    """Base class of rockroll's text environments (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}
    #: the game's rules, shown to the agent in the system prompt
    instructions: str = ""
    #: how the agent must phrase an action, shown in the system prompt
    action_format: str = "Answer with your action inside <answer>...</answer>."
    #: the functions the agent may call (none: a text env; see :class:`rockroll.envs.tool_env.ToolEnv`)
    tools: ClassVar[tuple[Tool, ...]] = ()

    def __init__(self, *, format_penalty: float = DEFAULT_FORMAT_PENALTY, render_mode: str | None = None):
        if not finite_number(format_penalty):
            raise EnvConfigError(
                f"format_penalty must be a finite number, got {format_penalty!r}",
                env=type(self).__name__,
                param="format_penalty",
            )
        if render_mode not in (None, "ansi"):
            raise EnvConfigError(
                f"render_mode must be None or 'ansi', got {render_mode!r}",
                env=type(self).__name__,
                param="render_mode",
            )
        self.format_penalty = float(format_penalty)
        self.render_mode = render_mode
        self.observation_space = TextSpace()
        self.action_space = TextSpace()
        self._needs_reset = True
        self._success = False

    # ----------------------------------------------------------------- hooks
    @abc.abstractmethod
    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        """Start a new episode using ``self.np_random``; return extra info."""

    @abc.abstractmethod
    def _parse_action(self, answer: str) -> A | None:
        """Map the answer text to an action, or None when it is not a legal action."""

    @abc.abstractmethod
    def _step(self, action: A) -> StepOutcome[A]:
        """Apply a legal action."""

    @abc.abstractmethod
    def _render(self) -> str:
        """The current observation text."""

    @abc.abstractmethod
    def _get_state(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot of the game (RNG excluded: the base class saves it)."""

    @abc.abstractmethod
    def _set_state(self, data: dict[str, Any]) -> None:
        """Restore a snapshot made by ``_get_state``."""

    def _invalid_observation(self, answer: str | None) -> str:
        """Observation after an unparsable or illegal action (default: unchanged view)."""
        return self._render()

    def action_candidates(self) -> list[str]:
        """Legal actions in the current state, as answer text without the ``<answer>`` tags.

        Used by random policies and the conformance test; an env with an open-ended action
        space returns a representative sample.
        """
        return []

    def _extra_info(self) -> dict[str, Any]:
        """Info every step and reset carries in addition to the standard keys."""
        return {}

    # ------------------------------------------------------------ public API
    def system_prompt(self) -> str:
        """Instructions for the agent: the rules, then the action format."""
        return f"{self.instructions.strip()}\n\n{self.action_format.strip()}".strip()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise EnvConfigError(f"seed must be a non-negative int or None, got {seed!r}", param="seed")
        if options is not None and not isinstance(options, dict):
            raise EnvConfigError(f"options must be a dict or None, got {type(options).__name__}", param="options")
        super().reset(seed=None if seed is None else int(seed))
        extra = self._reset(dict(options or {}))
        self._needs_reset = False
        self._success = False
        info = {"action_is_valid": True, "action_is_effective": False, "success": False}
        info.update(self._extra_info())
        info.update(extra)
        return self._render(), info

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if isinstance(action, ToolAction):  # a turn of text only is its text; a text env has no tool to call
            if action.calls:
                reason = f"{type(self).__name__} declares no tools: a turn with tool calls needs a tool env"
                raise ActionTypeError(action, field="action.tool_calls", reason=reason)
            action = action.text
        if not isinstance(action, str):
            raise ActionTypeError(action)
        if self._needs_reset:
            raise ResetNeeded(f"{type(self).__name__}.step() called before reset() or after the episode ended")
        answer = parse_answer(action)
        parsed = None if answer is None else self._parse_action(answer)
        if parsed is None:
            info = {"action_is_valid": False, "action_is_effective": False, "success": self._success}
            info.update(self._extra_info())
            return self._invalid_observation(answer), self.format_penalty, False, False, info
        out = self._step(parsed)
        self._success = out.success
        if out.terminated:
            self._needs_reset = True
        info = {"action_is_valid": True, "action_is_effective": out.effective, "success": out.success}
        info.update(self._extra_info())
        info.update(out.info)
        return out.observation, out.reward, out.terminated, False, info

    def render(self) -> str:
        return self._render()

    def get_state(self) -> dict[str, Any]:
        """Snapshot of the whole env (game and RNG) as plain JSON types."""
        return {
            "format": STATE_FORMAT,
            "env": type(self).__name__,
            "needs_reset": self._needs_reset,
            "success": self._success,
            "rng": _jsonable(self.np_random.bit_generator.state),
            "data": self._get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state` (of an env built with the same kwargs)."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise StateError("not a rockroll env snapshot (missing or unknown 'format')")
        if state.get("env") != type(self).__name__:
            raise StateError(f"snapshot is of {state.get('env')!r}, this env is {type(self).__name__!r}")
        try:
            rng = np.random.Generator(np.random.PCG64())
            rng.bit_generator.state = state["rng"]
            self._set_state(state["data"])
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise StateError(f"invalid {type(self).__name__} snapshot: {e}") from e
        self._np_random = rng
        self._needs_reset = bool(state["needs_reset"])
        self._success = bool(state["success"])


def reseed_snapshot(state: dict[str, Any], seed: int) -> dict[str, Any]:
    """A copy of a snapshot (from :meth:`TextEnv.get_state`, possibly inside wrappers' snapshots) whose
    RNG stream is fresh and seeded by ``seed``: the same game state, independent future randomness
    (forked continuations of one state each see their own slips, spawns...)."""
    if isinstance(state, dict) and state.get("format") == STATE_FORMAT:
        return {**state, "rng": _jsonable(np.random.Generator(np.random.PCG64(seed)).bit_generator.state)}
    if isinstance(state, dict):
        return {k: reseed_snapshot(v, seed) if isinstance(v, dict) else v for k, v in state.items()}
    return state


def _jsonable(obj: object) -> object:
    """Convert numpy scalars/arrays inside a nested structure to plain Python types."""
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def finite_number(x: object) -> TypeGuard[int | float]:
    """Whether ``x`` is an int or float with a finite value (an int too large for a float is not)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:
        return False
