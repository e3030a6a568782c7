"""The env-source contract: :class:`EnvSource` (open, give back, batch env calls) and :data:`EnvCall`.

The sources themselves, the registry of source kinds and the story of batched calls:
:mod:`rockroll.agentrl.sources.kinds` (which re-exports these names).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Hashable
from typing import Any, Literal, Protocol, TypedDict

import rockroll.envhub as envhub
from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.errors import ActionTypeError
from rockroll.envs.tools import Action, ToolAction

__all__ = ["EnvCall", "EnvSource", "ResetArg", "SourceSettings", "reset_kwargs"]

log = logging.getLogger("rockroll.agentrl.sources.kinds")


class SourceSettings(Protocol):
    """What the openers of the built-in source kinds read of a source's config (an eval config's
    :class:`~rockroll.agentrl.eval.config.SourceConfig` is one)."""

    @property
    def kind(self) -> str: ...

    @property
    def backend(self) -> str: ...

    @property
    def max_sandboxes(self) -> int: ...


#: a reset call's argument: a seed, or a ``(seed, options)`` pair
ResetArg = int | None | tuple[int | None, dict[str, Any] | None]
#: one env call of a batch: ``(env, "step", action)``, ``(env, "reset", seed)`` or ``(env, "reset", (seed, options))``;
#: an action is the agent's text or a turn with tool calls (:class:`~rockroll.envs.tools.ToolAction`)
EnvCall = tuple[TextEnvProtocol, Literal["step", "reset"], Action | ResetArg]


class ResetKwargs(TypedDict):
    seed: int | None
    options: dict[str, Any] | None


def reset_kwargs(arg: ResetArg | Action) -> ResetKwargs:
    """A reset call's argument (a seed, or a ``(seed, options)`` pair) as ``reset``'s keyword arguments."""
    if isinstance(arg, tuple):
        seed, options = arg
        return {"seed": seed, "options": options}
    if isinstance(arg, (str, ToolAction)):
        raise TypeError(f"a reset's argument is a seed or a (seed, options) pair, got {arg!r}")
    return {"seed": arg, "options": None}


def _call_one(env: TextEnvProtocol, op: str, arg: Action | ResetArg) -> object:
    if op == "step":
        if not isinstance(arg, (str, ToolAction)):
            raise ActionTypeError(arg)
        return env.step(arg)
    if op == "reset":
        return env.reset(**reset_kwargs(arg))
    raise ValueError(f"env call op must be 'step' or 'reset', got {op!r}")


class EnvSource:
    """Base class: opens and closes envs, counting those out, and runs batches of env calls."""

    name = "base"
    #: True when :meth:`call_batch` costs one round trip per batch key, so a group goes in one call;
    #: False: calls may be handed over one at a time (a slow one then holds up only itself)
    round_trip_batches = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open_count = 0
        self.opened = 0

    def _open(self, env_id: str, kwargs: dict[str, object]) -> TextEnvProtocol:
        raise NotImplementedError

    def open(
        self, env_id: str, kwargs: dict[str, object] | None = None, *, avoid: Collection[str] = (), group: str = ""
    ) -> TextEnvProtocol:
        """A fresh env for one episode attempt (blocking); a source that places envs (:meth:`location`)
        puts it on none of the places in ``avoid``, and may spread the envs of one ``group`` (a rollout
        group's id) over its places."""
        kwargs = dict(kwargs or {})
        if group:
            env = self._open_in_group(env_id, kwargs, avoid, group)
        else:
            env = self._open_avoiding(env_id, kwargs, avoid) if avoid else self._open(env_id, kwargs)
        with self._lock:
            self.open_count += 1
            self.opened += 1
        return env

    def open_now(
        self, env_id: str, kwargs: dict[str, object] | None = None, *, avoid: Collection[str] = (), group: str = ""
    ) -> TextEnvProtocol | None:
        """:meth:`open` when it needs no I/O and cannot block (a kept env ready for reuse), else None: the caller
        then opens through :meth:`open` in a worker thread."""
        env = self._open_now(env_id, dict(kwargs or {})) if not avoid else None
        if env is not None:
            with self._lock:
                self.open_count += 1
                self.opened += 1
        return env

    def _open_now(self, env_id: str, kwargs: dict[str, object]) -> TextEnvProtocol | None:
        """A kept env of ``env_id`` ready at once, else None (sources that keep none: always None)."""
        return None

    def _open_avoiding(self, env_id: str, kwargs: dict[str, object], avoid: Collection[str]) -> TextEnvProtocol:
        """:meth:`_open` away from ``avoid`` (sources without places: ignored)."""
        return self._open(env_id, kwargs)

    def _open_in_group(
        self, env_id: str, kwargs: dict[str, object], avoid: Collection[str], group: str
    ) -> TextEnvProtocol:
        """:meth:`open` for an env of rollout group ``group`` (sources that do not spread groups: as without)."""
        return self._open_avoiding(env_id, kwargs, avoid) if avoid else self._open(env_id, kwargs)

    def location(self, env: TextEnvProtocol) -> str | None:
        """Where ``env`` runs (a sandbox id), for hedging elsewhere; None: the source does not place envs."""
        return None

    def check_env(self, env_id: str) -> None:
        """Raise ``UnknownEnvError`` (a ``LookupError``, with suggestions) unless this source can open ``env_id``;
        opens nothing. By default: an env registered in this process (``envhub``)."""
        envhub.spec(env_id)

    def close(self, env: TextEnvProtocol) -> None:
        """Give the env back (blocking, never raises)."""
        try:
            env.close()
        except Exception as e:  # noqa: BLE001 - a broken env must not break the rollout
            log.debug("closing %r failed: %s", env, e)
        finally:
            with self._lock:
                self.open_count -= 1

    def give_back(self, env: TextEnvProtocol, *, reusable: bool = False) -> None:
        """Give the env back after an episode attempt (blocking, never raises). ``reusable``: the
        attempt ended cleanly (no infra failure, no cancellation, no call left running), so a
        source that keeps envs for later episodes may keep this one; the default closes it."""
        self.close(env)

    def release_idle(self) -> None:
        """Close the envs kept for reuse (none by default)."""

    def batch_key(self, env: TextEnvProtocol) -> Hashable | None:
        """Calls to envs with the same key may be batched (one :meth:`call_batch`); None (the
        default, for envs whose calls may be slow, e.g. over HTTP): one call per worker thread."""
        return None

    def call_batch(self, calls: list[EnvCall]) -> list[object]:
        """Run ``calls`` (blocking); each one's answer (a step's 5-tuple, a reset's pair) or the
        exception it raised, in order: one failure never spoils the others."""
        out: list[object] = []
        for env, op, arg in calls:
            try:
                out.append(_call_one(env, op, arg))
            except Exception as e:  # noqa: BLE001 - answered per call
                out.append(e)
        return out
