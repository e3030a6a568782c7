"""Env sources: where env managers get their envs (in-process, sandbox session, or the HTTP API).

An :class:`EnvSource` opens one env for one episode attempt and takes it back afterwards. All
sources hand out objects with the text-env contract (``reset``, ``step``, ``close``,
``system_prompt``), so env managers run the same code against each:

* :class:`LocalSource`: ``envhub.make`` in this process.
* :class:`SandboxSource`: ``SandboxManager.open_session`` (warm sandboxes are reused: the manager
  places each session on the least-loaded ready sandbox).
* :class:`CallableSource`: any ``open(env_id, kwargs)`` function (e.g. a job context's placement).
* ``RemoteSource`` (:mod:`rockroll.api.remote_source`, beside ``RemoteEnv``): sessions of the
  control plane over its HTTP API. It lives in the API layer, above this one.

``open``/``close`` block; env managers call them in a thread pool. ``close`` never raises, and
``open_count`` says how many envs are out (the leak check of tests and benches).

Source kinds (what ``source.kind`` of an eval config names) are a registry, like the engines:
:data:`SOURCE_KINDS` maps a kind to an opener, ``opener(config)`` a context manager yielding a
source and closing whatever it started; :func:`open_source` picks one. ``local`` and ``sandbox``
are registered here; ``remote`` by :mod:`rockroll.api.remote_source`, found through the
``rockroll.env_sources`` entry point the first time it is asked for. Adding a kind is one opener
plus :func:`register_source_kind` (and an entry point when it lives above this layer).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import rockroll.envhub as envhub
from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.registries import Registry
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import CapacityError
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.pool import PoolConfig
from rockroll.sandbox.retry import POLL_MAX_DELAY_S, retry_call

__all__ = [
    "EnvSource",
    "LocalSource",
    "SandboxSource",
    "CallableSource",
    "SOURCE_KINDS",
    "SourceOpener",
    "register_source_kind",
    "open_source",
]

log = logging.getLogger(__name__)


class EnvSource:
    """Base class: opens and closes envs, counting those out."""

    name = "base"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open_count = 0
        self.opened = 0

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> TextEnvProtocol:
        raise NotImplementedError

    def open(self, env_id: str, kwargs: dict[str, Any] | None = None) -> TextEnvProtocol:
        """A fresh env for one episode attempt (blocking)."""
        env = self._open(env_id, dict(kwargs or {}))
        with self._lock:
            self.open_count += 1
            self.opened += 1
        return env

    def close(self, env: TextEnvProtocol) -> None:
        """Give the env back (blocking, never raises)."""
        try:
            env.close()
        except Exception as e:  # noqa: BLE001 - a broken env must not break the rollout
            log.debug("closing %r failed: %s", env, e)
        finally:
            with self._lock:
                self.open_count -= 1


class LocalSource(EnvSource):
    """Envs built in this process with ``envhub.make``."""

    name = "local"

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> TextEnvProtocol:
        return envhub.make(env_id, **kwargs)


class SandboxSource(EnvSource):
    """Env sessions in sandboxes of a :class:`~rockroll.sandbox.manager.SandboxManager`.

    Args:
        manager: the sandbox manager (owned by the caller).
        spec: sandbox spec (pool) to place sessions on; None: the manager's default.
        capacity_wait_s: how long an open waits for a free session slot when the manager is at
            capacity (a full pool is backpressure, not a failure).
    """

    name = "sandbox"

    def __init__(
        self, manager: SandboxManager, spec: SandboxSpec | None = None, *, capacity_wait_s: float = 120.0
    ) -> None:
        super().__init__()
        self.manager = manager
        self.spec = spec
        self.capacity_wait_s = capacity_wait_s

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> TextEnvProtocol:
        """Open a session; while every sandbox is full and none may start, wait (backpressure)."""
        return retry_call(
            lambda: self.manager.open_session(env_id, spec=self.spec, **kwargs),
            retry_on=CapacityError,
            timeout_s=self.capacity_wait_s,
            max_delay_s=POLL_MAX_DELAY_S,
        )


class CallableSource(EnvSource):
    """Envs from a function ``open_fn(env_id, kwargs)`` (closed with their own ``close``)."""

    name = "callable"

    def __init__(self, open_fn: Callable[[str, dict[str, Any]], TextEnvProtocol]) -> None:
        super().__init__()
        self.open_fn = open_fn

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> TextEnvProtocol:
        return self.open_fn(env_id, kwargs)


# ------------------------------------------------------------------ source kinds
#: ``opener(config)``: a context manager yielding the source ``config`` (an eval ``SourceConfig``) describes
SourceOpener = Callable[[Any], AbstractContextManager[EnvSource]]
ENTRY_POINT_GROUP = "rockroll.env_sources"
#: source kind -> opener (``remote`` comes from :mod:`rockroll.api.remote_source`, through the entry point)
SOURCE_KINDS: Registry[SourceOpener] = Registry("env source kind", "source.kind", plugins=ENTRY_POINT_GROUP)


def register_source_kind(kind: str, opener: SourceOpener) -> None:
    """Make ``open_source(config)`` with ``config.kind == kind`` use ``opener`` (a later one replaces it)."""
    SOURCE_KINDS.add(kind, opener, override=True)


def open_source(config: Any) -> AbstractContextManager[EnvSource]:
    """The env source ``config`` describes (``config.kind`` picks the opener); closes what it made on exit.

    An unknown kind raises :class:`~rockroll.envs.registries.UnknownNameError` (a ``ValueError``).
    """
    return SOURCE_KINDS.get(config.kind)(config)


@contextlib.contextmanager
def _open_local(config: Any) -> Iterator[EnvSource]:
    yield LocalSource()


@contextlib.contextmanager
def _open_sandbox(config: Any) -> Iterator[EnvSource]:
    """A SandboxManager of its own (``config.backend``, ``config.max_sandboxes``) with a warm pool."""
    records = tempfile.mkdtemp(prefix="rockroll-eval-")  # this manager's records die with it
    manager = SandboxManager(
        backend=config.backend, name=f"eval-{os.getpid()}-{uuid.uuid4().hex[:6]}", max_sandboxes=config.max_sandboxes,
        pools=(PoolConfig(min_idle=1, max_total=config.max_sandboxes),), idle_ttl_s=None,
        db_url=f"sqlite:///{records}/sandboxes.db",
    )  # fmt: skip
    try:
        yield SandboxSource(manager)
    finally:
        manager.close()
        shutil.rmtree(records, ignore_errors=True)


register_source_kind("local", _open_local)
register_source_kind("sandbox", _open_sandbox)
