"""Errors of the env registry."""

from __future__ import annotations

from rockroll.envs.errors import EnvError, RockrollError

__all__ = ["RockrollError", "RegistryError", "UnknownEnvError", "RegistrationError"]


class RegistryError(EnvError):
    """Base class of registry errors."""


class UnknownEnvError(RegistryError, LookupError):
    """No env is registered under this id.

    Attributes:
        env_id: the id that was asked for.
        suggestions: registered ids that look close to it.
    """

    def __init__(self, env_id: str, suggestions: list[str]) -> None:
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"No env registered as {env_id!r}.{hint} `rockroll envs list` shows every id.")
        self.env_id = env_id
        self.suggestions = suggestions


class RegistrationError(RegistryError, ValueError):
    """A spec could not be registered (bad id, bad entry point, duplicate)."""
