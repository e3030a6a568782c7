"""Env sources: where env managers get their envs (in-process, sandbox session, or the HTTP API).

An :class:`EnvSource` opens one env for one episode attempt and takes it back afterwards. All
sources hand out objects with the text-env contract (``reset``, ``step``, ``close``,
``system_prompt``), so env managers run the same code against each:

* :class:`LocalSource`: ``envhub.make`` in this process.
* :class:`SandboxSource`: ``SandboxManager.open_session`` (warm sandboxes are reused: the manager
  places each session on the least-loaded ready sandbox).
* :class:`CallableSource`: any ``open(env_id, kwargs)`` function (e.g. a job context's placement).
* ``RemoteSource`` (:mod:`rockroll.agentrl.remote_source`, beside ``RemoteEnv``): sessions of the
  control plane over its HTTP API. It lives in the API layer, above this one.

``open``/``close`` block; env managers call them in a thread pool. ``close`` never raises, and
``open_count`` says how many envs are out (the leak check of tests and benches).

Batched calls: env managers hand the resets and steps made at the same moment to
:meth:`EnvSource.call_batch` together, grouped by :meth:`EnvSource.batch_key`. :class:`LocalSource`
runs a batch one call after another in one worker thread (a thread hand-off per call costs more
than a FrozenLake step); :class:`SandboxSource` sends the calls for the sessions of one sandbox in
one round trip (``env.batch`` of the in-sandbox server, :func:`rockroll.sandbox.session.run_batch`)
instead of one round trip per session. Other sources (key None) get one worker call per env call,
as before. Each call's answer or exception comes back on its own.

Source kinds (what ``source.kind`` of an eval config names) are a registry, like the engines:
:data:`SOURCE_KINDS` maps a kind to an opener, ``opener(config)`` a context manager yielding a
source and closing whatever it started; :func:`open_source` picks one. ``local`` and ``sandbox``
are registered here, ``remote`` as a lazy entry of :mod:`rockroll.agentrl.remote_source` (imported the
first time it is asked for, so httpx loads only then). Adding a kind is one opener plus
:func:`register_source_kind`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Collection, Hashable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Literal

import rockroll.envhub as envhub
from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.registries import Registry
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import CapacityError
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.pool import PoolConfig
from rockroll.sandbox.retry import POLL_MAX_DELAY_S, retry_call
from rockroll.sandbox.session import RemoteSession, run_batch

__all__ = [
    "EnvCall",
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

#: one env call of a batch: ``(env, "step", action)``, ``(env, "reset", seed)`` or ``(env, "reset", (seed, options))``
EnvCall = tuple[TextEnvProtocol, Literal["step", "reset"], Any]


def reset_kwargs(arg: Any) -> dict[str, Any]:
    """A reset call's argument (a seed, or a ``(seed, options)`` pair) as ``reset``'s keyword arguments."""
    seed, options = arg if isinstance(arg, tuple) else (arg, None)
    return {"seed": seed, "options": options}


def _call_one(env: TextEnvProtocol, op: str, arg: Any) -> object:
    if op == "step":
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


class LocalSource(EnvSource):
    """Envs built in this process with ``envhub.make``; their calls run one after another in one
    worker thread per batch (a slow one gets help, see :mod:`rockroll.agentrl.env_manager`)."""

    name = "local"

    def _open(self, env_id: str, kwargs: dict[str, object]) -> TextEnvProtocol:
        return envhub.make(env_id, **kwargs)

    def batch_key(self, env: TextEnvProtocol) -> Hashable | None:
        return self.name


class SandboxSource(EnvSource):
    """Env sessions in sandboxes of a :class:`~rockroll.sandbox.manager.SandboxManager`.

    Sessions are reused: a session given back after a clean episode (:meth:`give_back` with
    ``reusable``) waits, open, for the next episode of the same env id and kwargs, which resets it
    on its own seed (the text-env contract: same seed, same episode), so an episode costs no
    ``env.make``/``env.close`` round trips and no new connection. A kept session whose sandbox was
    replaced or deleted is closed instead of reused; when every sandbox is full, kept sessions of
    other envs are closed to make room; :meth:`release_idle` closes them all (the env manager does
    at shutdown).

    Args:
        manager: the sandbox manager (owned by the caller).
        spec: sandbox spec (pool) to place sessions on; None: the manager's default.
        capacity_wait_s: how long an open waits for a free session slot when the manager is at
            capacity (a full pool is backpressure, not a failure).
        reuse_sessions: keep sessions for later episodes (False: one session per episode).
    """

    name = "sandbox"
    round_trip_batches = True

    def __init__(
        self,
        manager: SandboxManager,
        spec: SandboxSpec | None = None,
        *,
        capacity_wait_s: float = 120.0,
        reuse_sessions: bool = True,
    ) -> None:
        super().__init__()
        self.manager = manager
        self.spec = spec
        self.capacity_wait_s = capacity_wait_s
        self.reuse_sessions = reuse_sessions
        self.reused = 0
        self._idle: dict[str, list[RemoteSession]] = {}  # env id + kwargs -> kept sessions
        self._opened: dict[int, tuple[str, int]] = {}  # id(session) -> (its key, its sandbox's generation at open)

    @staticmethod
    def _key(env_id: str, kwargs: dict[str, object]) -> str:
        return json.dumps([env_id, kwargs], sort_keys=True, default=repr)

    def _open(self, env_id: str, kwargs: dict[str, object]) -> TextEnvProtocol:
        """A kept session of this env, else a new one; while every sandbox is full and none may
        start, make room by closing kept sessions, else wait (backpressure)."""
        key = self._key(env_id, kwargs)
        while True:
            with self._lock:
                kept = self._idle.get(key)
                session = kept.pop() if kept else None
            if session is None:
                break
            if self._alive(session):
                self.reused += 1
                return session
            self._discard(session)
        return self._new_session(env_id, kwargs)

    def _new_session(self, env_id: str, kwargs: dict[str, object], avoid: Collection[str] = ()) -> RemoteSession:
        """A new session on a sandbox not in ``avoid``; at capacity, kept sessions are closed to make room,
        else it waits (backpressure)."""

        def open_session() -> RemoteSession:
            try:
                return self.manager.open_session(env_id, spec=self.spec, avoid=avoid, **kwargs)
            except CapacityError:
                if not self._discard_one():
                    raise
                return self.manager.open_session(env_id, spec=self.spec, avoid=avoid, **kwargs)

        session = retry_call(
            open_session, retry_on=CapacityError, timeout_s=self.capacity_wait_s, max_delay_s=POLL_MAX_DELAY_S
        )
        self._opened[id(session)] = (self._key(env_id, kwargs), session.sandbox.generation)
        return session

    def _open_avoiding(self, env_id: str, kwargs: dict[str, object], avoid: Collection[str]) -> TextEnvProtocol:
        """A new session on a sandbox not in ``avoid`` (kept sessions are not reused: they may sit there)."""
        return self._new_session(env_id, kwargs, avoid)

    def _open_in_group(
        self, env_id: str, kwargs: dict[str, object], avoid: Collection[str], group: str
    ) -> TextEnvProtocol:
        """:meth:`open` for an env of rollout group ``group`` (sources that do not spread groups: as without)."""
        return self._open_avoiding(env_id, kwargs, avoid) if avoid else self._open(env_id, kwargs)

    def location(self, env: TextEnvProtocol) -> str | None:
        return env.sandbox_id if isinstance(env, RemoteSession) else None

    def _alive(self, session: RemoteSession) -> bool:
        sb = session.sandbox
        opened = self._opened.get(id(session))
        return opened is not None and not session.closed and not sb.deleted and sb.generation == opened[1]

    def _discard(self, session: RemoteSession) -> None:
        """Close a kept session (not counted as out)."""
        self._opened.pop(id(session), None)
        try:
            session.close()
        except Exception as e:  # noqa: BLE001 - closing a lost session must not break the rollout
            log.debug("closing %r failed: %s", session, e)

    def _discard_one(self) -> bool:
        with self._lock:
            kept = next((v for v in self._idle.values() if v), None)
            session = kept.pop() if kept else None
        if session is None:
            return False
        self._discard(session)
        return True

    def give_back(self, env: TextEnvProtocol, *, reusable: bool = False) -> None:
        if not (reusable and self.reuse_sessions and isinstance(env, RemoteSession) and self._alive(env)):
            self.close(env)
            return
        with self._lock:
            self._idle.setdefault(self._opened[id(env)][0], []).append(env)
            self.open_count -= 1

    def close(self, env: TextEnvProtocol) -> None:
        self._opened.pop(id(env), None)
        super().close(env)

    def release_idle(self) -> None:
        with self._lock:
            kept = [s for v in self._idle.values() for s in v]
            self._idle.clear()
        for session in kept:
            self._discard(session)

    def batch_key(self, env: TextEnvProtocol) -> Hashable | None:
        """Sessions of one sandbox batch together: one round trip for all of them."""
        return ("sandbox", env.sandbox_id) if isinstance(env, RemoteSession) else None

    def call_batch(self, calls: list[EnvCall]) -> list[object]:
        """The sessions' calls in one ``env.batch`` round trip per sandbox (other envs one by one)."""
        sessions = [env for env, _op, _arg in calls if isinstance(env, RemoteSession)]
        if len(sessions) < len(calls):
            return super().call_batch(calls)
        items = [
            (session, op, {"action": arg} if op == "step" else reset_kwargs(arg))
            for session, (_env, op, arg) in zip(sessions, calls, strict=True)
        ]
        return run_batch(items)


class CallableSource(EnvSource):
    """Envs from a function ``open_fn(env_id, kwargs)`` (closed with their own ``close``)."""

    name = "callable"

    def __init__(
        self,
        open_fn: Callable[[str, dict[str, Any]], TextEnvProtocol],
        check: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.open_fn = open_fn
        self.check = check

    def check_env(self, env_id: str) -> None:
        """``check(env_id)`` when given; else nothing is checked (whoever supplies ``open_fn`` resolves ids:
        a job's envs were resolved for its owner when it was submitted)."""
        if self.check is not None:
            self.check(env_id)

    def _open(self, env_id: str, kwargs: dict[str, object]) -> TextEnvProtocol:
        return self.open_fn(env_id, kwargs)


# ------------------------------------------------------------------ source kinds
#: ``opener(config)``: a context manager yielding the source ``config`` (an eval ``SourceConfig``) describes
SourceOpener = Callable[[Any], AbstractContextManager[EnvSource]]
#: source kind -> opener (``remote`` is the lazy entry of :mod:`rockroll.agentrl.remote_source`)
SOURCE_KINDS: Registry[SourceOpener] = Registry("env source kind", "source.kind")


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
SOURCE_KINDS.add("remote", "rockroll.agentrl.remote_source:open_remote_source")
SOURCE_KINDS.add("openenv", "rockroll.agentrl.openenv_source:open_openenv_source")  # an OpenEnv env server
