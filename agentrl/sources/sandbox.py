"""``SandboxSource``: env sessions in the sandboxes of a :class:`~rockroll.sandbox.manager.SandboxManager`.

Split from :mod:`rockroll.agentrl.sources.kinds` (which re-exports it and registers its source kind, ``sandbox``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Collection, Hashable, Iterator

from rockroll.agentrl.sources.base import EnvCall, EnvSource, SourceSettings, reset_kwargs
from rockroll.envs.core import TextEnvProtocol
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import CapacityError
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.pool import PoolConfig
from rockroll.sandbox.retry import POLL_MAX_DELAY_S, retry_call
from rockroll.sandbox.session import RemoteSession, run_batch

__all__ = ["SandboxSource", "open_sandbox_source"]

log = logging.getLogger("rockroll.agentrl.sources.kinds")


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
        """A kept session of this env that is still alive (:meth:`_open_now`; dead ones are closed on the way),
        else a new one; while every sandbox is full and none may start, make room by closing kept sessions,
        else wait (backpressure)."""
        key = self._key(env_id, kwargs)
        while (session := self._open_now(env_id, kwargs)) is None:
            with self._lock:
                kept = self._idle.get(key)
                dead = kept.pop() if kept else None
            if dead is None:
                return self._new_session(env_id, kwargs)
            self._discard(dead)
        return session

    def _open_now(self, env_id: str, kwargs: dict[str, object]) -> TextEnvProtocol | None:
        """A kept session that is still alive, taken without I/O (a dead one goes back for :meth:`_open` to close)."""
        key = self._key(env_id, kwargs)
        with self._lock:
            kept = self._idle.get(key)
            if not kept:
                return None
            session = kept.pop()
            if not self._alive(session):
                kept.append(session)
                return None
            self.reused += 1
        return session

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


@contextlib.contextmanager
def open_sandbox_source(config: SourceSettings) -> Iterator[EnvSource]:
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
