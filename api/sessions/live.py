"""Env sessions opened through the API: who owns them, where they run, and the calls on them.

The live :class:`~rockroll.sandbox.session.RemoteSession` objects are kept in memory (the hot path: a step
touches no database); each session is also recorded in ``api_sessions`` with its owner, env,
sandbox, node agent and step count (written at open and at close, :mod:`rockroll.api.sessions.records`).

A session on a standalone node agent outlives the server that opened it: any control-plane replica
on the database, or the next server after a restart, finds its row and *adopts* it (a handle on the
agent, made on first use), so it is stepped, listed and closed through any of them. One closed
through another replica answers 404 here too (its agent no longer holds it, and its row says closed).
Sessions whose opening server is gone are adopted by the idle reaper, so they are still reaped.

A session on this server's own sandboxes (the embedded agent, or none) dies with the server: after a
restart, graceful or a crash, its record still open answers ``410 sandbox_lost`` with the reason. A
graceful shutdown closes those env sessions in their sandboxes but leaves their records open for that
answer; only a client's close (or the idle reaper) closes a record, after which the id answers 404.
"""

from __future__ import annotations

import builtins
import logging
import secrets
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Protocol

from sqlalchemy.exc import IntegrityError

from rockroll.api.db import Database, SessionRecord
from rockroll.api.nodes.table import NodeEntry, NodeTable
from rockroll.api.server.auth import Principal
from rockroll.api.server.errors import ApiError
from rockroll.api.server.metrics import Metrics
from rockroll.api.sessions.live_batch import Item, Result, lost_guard, lost_reason, node_lost, run_items, server_gone
from rockroll.api.sessions.reaper import LiveSession, SessionReaping
from rockroll.api.sessions.records import (
    body_hash,
    drop_key,
    find,
    find_by_key,
    group_spread,
    is_closed,
    open_on_nodes,
    record_close,
    record_intent,
    record_open,
    rows_of,
)
from rockroll.envs.json_types import JSONObject
from rockroll.envs.tools import Action
from rockroll.sandbox.lease import tag_live
from rockroll.sandbox.node.agent import NodeAgent
from rockroll.sandbox.node.remote import NodeSession
from rockroll.sandbox.server.wire import OpenedSession
from rockroll.sandbox.session import EnvSession, RemoteSession

__all__ = ["LiveSession", "Placer", "SessionRegistry", "new_session_id", "OPEN_WAIT_S"]

log = logging.getLogger("rockroll.api")

#: seconds a resent open waits for the first one (still under way) before giving it up
OPEN_WAIT_S = 30.0


def _played(answer: JSONObject) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """A step's answer of the embedded node agent (what the session's ``step`` returned, numbered) as ``step``'s
    5-tuple."""
    obs, reward, info = answer["observation"], answer["reward"], answer["info"]
    if not isinstance(obs, str) or not isinstance(reward, (int, float)) or not isinstance(info, dict):
        raise TypeError(f"a step answers (str, number, bool, bool, object), got {answer!r:.200}")
    return obs, reward, bool(answer["terminated"]), bool(answer["truncated"]), info


class Placer(Protocol):
    """Where :meth:`SessionRegistry.open` places a session: a node agent's, or this server's sandboxes (node '')."""

    def __call__(
        self,
        session_id: str,
        env: str,
        kwargs: dict[str, Any],
        owner: str,
        *,
        spread: Mapping[str, int] | None = None,
        avoid: Collection[str] = (),
        before_open: Callable[[str], None] | None = None,
    ) -> tuple[EnvSession, str]: ...


class SessionRegistry(SessionReaping):
    """Open, find, play, fork and close sessions (ownership checked on every lookup)."""

    def __init__(
        self,
        db: Database,
        open_env: Callable[..., RemoteSession],
        metrics: Metrics,
        *,
        place: Placer | None = None,
        agent: NodeAgent | None = None,
        nodes: NodeTable | None = None,
        server: str = "",
    ) -> None:
        self.db = db
        self.open_env = open_env
        self.metrics = metrics
        self.place = place  # (session id, env, kwargs, owner) -> (remote, node id): picks a node agent
        self.agent = agent  # the embedded node agent: sessions on this server's sandboxes are served by it
        self.nodes = nodes  # the node agents (rockroll.api.nodes.table.NodeTable): where adopted sessions run
        self.server = server  # this server's lease tag (name@holder), recorded with the sessions it opens
        self._live: dict[str, LiveSession] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="batch")
        self._stop = threading.Event()
        self._unrecorded: set[str] = set()  # ids agents held with no row on the last reconcile

    def __len__(self) -> int:
        return len(self._live)

    # ------------------------------------------------------------ lookup
    def get(self, session_id: str, who: Principal, *, lost_ok: bool = False) -> LiveSession:
        """The session, or 404 when it does not exist or belongs to someone else; 410 when lost
        (``lost_ok``: a session whose node agent was lost is returned, e.g. to be closed)."""
        live = self._live.get(session_id)
        if live is None:
            live = self._adopt_by_id(session_id, who)
        if live is not None and who.can_see(live.owner):
            if not lost_ok and lost_reason(live):  # its node agent was declared lost
                raise node_lost(live)
            live.last_used = time.monotonic()
            return live
        raise ApiError(404, "session_not_found", f"no session {session_id!r}")

    def _adopt_by_id(self, session_id: str, who: Principal) -> LiveSession | None:
        """The session opened by another replica or an earlier server, from its row (see the module docstring)."""
        if not session_id.startswith("se-"):
            return None
        rec = find(self.db, session_id)
        if rec is None or not who.can_see(rec.owner) or rec.closed_at is not None:
            return None
        entry = self.nodes.get(rec.node_id) if self.nodes is not None and rec.node_id else None
        if entry is None or entry.admin is None:  # it lived on a server's own sandboxes
            opener_live = rec.server != self.server and bool(tag_live(self.db.engine, [rec.server]))
            raise server_gone(rec, opener_live)
        return self._adopt(rec, entry)

    def _adopt(self, rec: SessionRecord, entry: NodeEntry) -> LiveSession:
        assert entry.admin is not None  # a standalone agent's entry (the callers look only at those)
        info: OpenedSession = {"session_id": rec.id, "sandbox_id": rec.sandbox_id, "env_id": rec.env_id,
                "system_prompt": rec.system_prompt}  # fmt: skip
        live = LiveSession(id=rec.id, owner=rec.owner, env_id=rec.env_id, kwargs=rec.kwargs,
                           remote=NodeSession(entry.admin, info, ask_tools=True), created_at=rec.created_at,
                           steps=rec.steps, node=rec.node_id)  # fmt: skip
        with self._lock:
            return self._live.setdefault(rec.id, live)

    def list(self, who: Principal) -> list[LiveSession]:
        """Open sessions the caller may see (those on node agents opened through other replicas too)."""
        if self.nodes is not None and self.nodes.store is not None:
            self.nodes.sync()
            serving = {n.id: n for n in self.nodes.standalone()}
            owner = None if who.admin else who.owner
            rows = open_on_nodes(self.db, owner, list(serving))
            self._settle([r for r in rows if r.id not in self._live], serving)
            self._forget_closed({r.id for r in rows}, set(serving), who)
        out = [s for s in list(self._live.values()) if who.can_see(s.owner)]
        return sorted(out, key=lambda live: live.created_at)

    def _forget_closed(self, open_ids: set[str], nodes: set[str], who: Principal) -> None:
        """Drop the sessions on standalone agents (``nodes``) held here whose rows another replica closed (it
        closed them at the agent too): a listing here must not show a session the others no longer do."""
        held = [s.id for s in list(self._live.values()) if s.node in nodes and s.id not in open_ids
                and who.can_see(s.owner)]  # fmt: skip
        for sid, rec in rows_of(self.db, held).items():
            if rec.closed_at is not None:
                self._live.pop(sid, None)

    # ------------------------------------------------------------- calls
    def open(
        self,
        who: Principal,
        env: str,
        kwargs: dict[str, Any],
        *,
        group: str = "",
        avoid: Collection[str] = (),
        key: str = "",
    ) -> LiveSession:
        """Place a new session on a node agent (``place``), or on this server's sandboxes (``open_env``).

        ``group``: the rollout group it belongs to (placement spreads a group over agents); ``avoid``:
        agents to stay off when another has room (a hedged copy of an episode); ``key``: the client's
        idempotency key: an open resent with it (to this or another replica) answers the session the
        first one opened.
        """
        digest = body_hash(env, kwargs, group, avoid) if key else ""
        if key:
            again = self._opened_with(who, key, digest)
            if again is not None:
                return again
        try:
            return self._open_new(who, env, kwargs, group, avoid, key, digest)
        except IntegrityError:  # the same key won a race at another replica
            again = self._opened_with(who, key, digest) if key else None
            if again is None:
                raise
            return again

    def _open_new(
        self,
        who: Principal,
        env: str,
        kwargs: dict[str, Any],
        group: str,
        avoid: Collection[str],
        key: str,
        digest: str = "",
    ) -> LiveSession:
        session_id = new_session_id()
        remote: EnvSession
        if self.place is None:  # a sandbox serving who.owner only
            remote = self.open_env(env, kwargs, owner=who.owner)
            return self._add(who.owner, remote.env_id or env, kwargs, remote, session_id=session_id, group=group,
                             key=key, digest=digest)  # fmt: skip
        spread = group_spread(self.db, who.owner, group) if group else {}
        asked: list[str] = []  # the agents asked to open it

        def intent(node_id: str) -> None:  # the row first: an agent never holds a session without one
            record_intent(self.db, session_id, who.owner, env, kwargs, node_id, group_key=group,
                          server=self.server, key=key, open_hash=digest or None)  # fmt: skip
            asked.append(node_id)

        try:
            remote, node = self.place(session_id, env, kwargs, who.owner, spread=spread, avoid=avoid,
                                      before_open=intent)  # fmt: skip
        except BaseException:
            if asked:  # an agent that did not answer may have opened it: closed there (or refused when it ends)
                self._close_at(asked, session_id)
                record_close(self.db, session_id, 0)
            raise
        self._close_at([n for n in asked if n != node], session_id)  # an agent asked before that did not answer
        return self._add(who.owner, remote.env_id or env, kwargs, remote, session_id=session_id, node=node,
                         group=group, key=key, digest=digest)  # fmt: skip

    def _opened_with(self, who: Principal, key: str, digest: str = "") -> LiveSession | None:
        """The session ``who`` opened with ``key`` (404 once closed); None when there is none, or when its
        open was cut off (its server died before the agent answered: the row is closed, the key freed).
        422 when that open had another body than ``digest`` says (a key reused for another session)."""
        deadline = time.monotonic() + OPEN_WAIT_S
        while True:
            rec = find_by_key(self.db, who.owner, key)
            if rec is None:
                return None
            if digest and rec.open_hash and rec.open_hash != digest:
                raise ApiError(422, "idempotency_key_reused", f"the Idempotency-Key {key!r} was used for an open "
                               "with another body (env, kwargs, group or avoid_nodes); use a new key for a new "
                               "session", {"session_id": rec.id})  # fmt: skip
            if rec.sandbox_id or rec.closed_at is not None:  # confirmed (or closed: 404)
                return self.get(rec.id, who, lost_ok=True)
            mine = rec.server == self.server
            if (not mine and not tag_live(self.db.engine, [rec.server])) or time.monotonic() > deadline:
                self._abandon(rec)
                return None
            time.sleep(0.1)  # its open is under way (here or at another replica)

    def _close_at(self, node_ids: Collection[str], session_id: str) -> None:
        """Close ``session_id`` at the agents ``node_ids`` (one still opening it refuses it when its open ends)."""
        for node_id in set(node_ids):
            entry = self.nodes.get(node_id) if self.nodes is not None else None
            if entry is not None and entry.admin is not None:
                NodeSession(entry.admin, {"session_id": session_id}).close()  # never raises

    def _abandon(self, rec: SessionRecord) -> None:
        """Give up a session whose open was cut off: closed at its agent (if it got that far), row closed."""
        log.warning("session %s: its open at %s was cut off; giving it up", rec.id, rec.server)
        if rec.node_id:
            self._close_at([rec.node_id], rec.id)
        drop_key(self.db, rec.id)

    def _add(
        self,
        owner: str,
        env_id: str,
        kwargs: dict[str, Any],
        remote: EnvSession,
        *,
        session_id: str = "",
        node: str = "",
        group: str = "",
        key: str = "",
        digest: str = "",
    ) -> LiveSession:
        session_id = session_id or getattr(remote, "control_id", "") or new_session_id()
        agent = self.agent if isinstance(remote, RemoteSession) else None  # on this server's sandboxes
        node = agent.id if agent is not None else node
        live = LiveSession(id=session_id, owner=owner, env_id=env_id, kwargs=kwargs, remote=remote, node=node)
        try:
            record_open(self.db, live, group=group, server=self.server, key=key, key_hash=digest)
        except BaseException:
            remote.close()
            raise
        if agent is not None and isinstance(remote, RemoteSession):
            live.entry = agent.attach(live.id, owner, remote)
        with self._lock:
            self._live[live.id] = live
        return live

    def reset(self, live: LiveSession, seed: int | None, options: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """Reset the env of ``live``."""
        with self._guard(live):
            return live.remote.reset(seed=seed, options=options)

    def step(self, live: LiveSession, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Step the env of ``live`` with the agent's text or a turn with tool calls (counted and timed for /metrics)."""
        live.last_used = time.monotonic()
        t0 = time.perf_counter()
        with self._guard(live):
            if live.entry is not None and self.agent is not None:  # numbered with the data plane's steps
                out = _played(self.agent.step(live.entry, action))  # (rockroll.sandbox.node.sequence)
            else:
                out = live.remote.step(action)
        live.steps += 1
        self.metrics.observe_step(time.perf_counter() - t0)
        return out

    def fork(self, live: LiveSession) -> LiveSession:
        """A new session continuing from ``live``."""
        with self._guard(live):
            remote = live.remote.fork()
        # a fork at a standalone agent is named there: the control plane's id must be the agent's (the data
        # plane's token names it), not a new one
        session_id = remote.session_id if isinstance(remote, NodeSession) else ""
        return self._add(live.owner, live.env_id, live.kwargs, remote, session_id=session_id, node=live.node)

    def action_candidates(self, live: LiveSession) -> builtins.list[str]:
        with self._guard(live):
            return list(live.remote.action_candidates())

    def get_state(self, live: LiveSession) -> dict[str, Any]:
        with self._guard(live):
            return live.remote.get_state()

    def set_state(self, live: LiveSession, state: dict[str, Any]) -> None:
        with self._guard(live):
            live.remote.set_state(state)

    def batch(self, who: Principal, items: builtins.list[Item]) -> builtins.list[Result]:
        """Run ``(session_id, op, action, seed)`` items; ``op`` is ``step`` or ``reset``.

        Items are grouped by sandbox; each group runs in order on one worker, groups run in
        parallel (so sessions spread over several sandboxes use several cores). Each result is
        the step/reset answer or ``{"error": {...}, "status": N}`` (:mod:`rockroll.api.sessions.live_batch`).
        """
        return run_items(self, who, items)

    @contextmanager
    def _guard(self, live: LiveSession) -> Iterator[None]:
        """:func:`~rockroll.api.sessions.live_batch.lost_guard`, and 404 for a session another replica closed (its agent no longer holds it)."""
        try:
            with lost_guard(live):
                yield
        except ApiError as e:
            if e.code == "sandbox_lost" and isinstance(live.remote, NodeSession) and is_closed(self.db, live.id):
                with self._lock:
                    self._live.pop(live.id, None)
                raise ApiError(404, "session_not_found", f"no session {live.id!r}") from e
            raise

    def close(self, live: LiveSession) -> None:
        """Close a session and record its end and step count."""
        with self._lock:
            self._live.pop(live.id, None)
        if live.entry is not None and self.agent is not None:
            self.agent.detach(live.id)
        live.remote.close()
        record_close(self.db, live.id, live.steps)


def new_session_id() -> str:
    return f"se-{secrets.token_hex(8)}"
