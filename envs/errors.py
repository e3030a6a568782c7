"""Typed errors raised by rockroll environments, and :class:`RockrollError`, the root of every rockroll error.

Every error derives from :class:`EnvError`, and also from the built-in exception a caller
would expect (``ValueError`` for bad configuration, ``TypeError`` for a non-string action), so
``except ValueError`` keeps working for code that does not know rockroll.

:class:`RockrollError` lives here because ``envs`` is the lowest layer: every package's error base
(``EnvError``, ``SandboxError``, the rollout and API errors) derives from it without importing
upwards, and each package's ``errors`` module re-exports it. ``except RockrollError`` catches
whatever rockroll raised on purpose.
"""

from __future__ import annotations

__all__ = ["RockrollError", "EnvError", "EnvConfigError", "ActionTypeError", "ResetNeeded", "StateError"]


class RockrollError(Exception):
    """Root of every error rockroll raises on purpose (each package's errors derive from it)."""


class EnvError(RockrollError):
    """Base class of every error raised by an environment."""


class EnvConfigError(EnvError, ValueError):
    """An environment was constructed with invalid keyword arguments.

    Attributes:
        env: the environment class name.
        param: the offending parameter, when one can be named.
    """

    def __init__(self, message: str, *, env: str = "", param: str | None = None) -> None:
        super().__init__(message)
        self.env = env
        self.param = param


class ActionTypeError(EnvError, TypeError):
    """``step`` was given something that is not an action: the agent's text, or a turn with tool calls
    (:class:`rockroll.envs.tools.ToolAction`).

    Attributes:
        action_type: the type of what was given.
        field: the part of the action that is wrong (``action``, ``action.tool_calls[0].name``, ...).
    """

    def __init__(self, action: object, *, field: str = "action", reason: str = "") -> None:
        super().__init__(
            reason
            or f"step() expects the agent's text (a str) or a ToolAction, got {type(action).__name__}: {action!r:.80}"
        )
        self.action_type = type(action).__name__
        self.field = field


class ResetNeeded(EnvError, RuntimeError):
    """``step`` (or ``get_state``) was called before ``reset`` or after the episode ended."""


class StateError(EnvError, ValueError):
    """``set_state`` was given a snapshot that does not belong to this environment."""
