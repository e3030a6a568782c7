"""The one place step limits live: :class:`MaxSteps` sets ``truncated``.

It passes every action through as it is (the agent's text, or a turn with tool calls) and shows the
wrapped env's :attr:`~rockroll.envs.core.TextEnv.tools`."""

from __future__ import annotations

import copy
from typing import Any, cast

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from rockroll.envs.action_wire import tools_of
from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.errors import ActionTypeError, EnvConfigError, ResetNeeded, StateError
from rockroll.envs.tools import Action, Tool, ToolAction

__all__ = ["MaxSteps"]


class MaxSteps(gym.Wrapper[str, str, str, str]):
    """Truncate an episode after ``max_steps`` calls to ``step`` (None: no limit).

    Every call counts, invalid actions included. Stepping after the episode ended raises
    :class:`~rockroll.envs.errors.ResetNeeded`. Other attributes (``system_prompt``, ``format_penalty``,
    env-specific helpers) are forwarded to the wrapped env.
    """

    def __init__(self, env: gym.Env, max_steps: int | None) -> None:
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
            raise EnvConfigError(f"max_steps must be a positive int or None, got {max_steps!r}", param="max_steps")
        super().__init__(env)
        self.max_steps = max_steps
        self.elapsed_steps = 0
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.elapsed_steps = 0
        self._done = False
        return obs, info

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The wrapped env's tools (``()``: a text env)."""
        return tools_of(self.env)

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not isinstance(action, (str, ToolAction)):
            raise ActionTypeError(action)
        if self._done:
            raise ResetNeeded("step() called before reset() or after the episode ended")
        obs, reward, terminated, truncated, info = cast(TextEnvProtocol, self.env).step(action)
        self.elapsed_steps += 1
        if self.max_steps is not None and self.elapsed_steps >= self.max_steps and not terminated:
            truncated = True
        self._done = bool(terminated or truncated)
        return obs, float(reward), terminated, truncated, info

    @property
    def spec(self) -> EnvSpec | None:
        """The wrapped env's gymnasium spec with ``max_episode_steps`` = this limit (as ``TimeLimit`` reports it)."""
        if self._cached_spec is None and self.env.spec is not None:
            try:
                env_spec = copy.deepcopy(self.env.spec)
            except Exception:  # noqa: BLE001 - an uncopyable kwarg: no spec, as gymnasium's TimeLimit does
                return None
            env_spec.max_episode_steps = self.max_steps
            self._cached_spec = env_spec
        return self._cached_spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        raise AttributeError("a wrapper's spec is read-only: it is the wrapped env's, with this step limit")

    def get_state(self) -> dict[str, Any]:
        return {
            "elapsed_steps": self.elapsed_steps,
            "done": self._done,
            "env": cast(TextEnvProtocol, self.env).get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or "env" not in state or "elapsed_steps" not in state:
            raise StateError("not a MaxSteps snapshot: expected keys 'elapsed_steps', 'done', 'env'")
        cast(TextEnvProtocol, self.env).set_state(state["env"])
        self.elapsed_steps = int(state["elapsed_steps"])
        self._done = bool(state.get("done", False))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.env, name)
