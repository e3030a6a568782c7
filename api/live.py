"""Env sessions opened through the API: who owns them, where they run, and the calls on them.

The live :class:`~rockroll.sandbox.session.RemoteSession` objects are kept in memory (the hot path: a step
touches no database); each session is also recorded in ``api_sessions`` with its owner, env,
sandbox and step count (written at open and at close). After a server restart, graceful or a
crash, a recorded session that was still open answers ``410 sandbox_lost`` with the reason: its env
state lived in the old server. A graceful shutdown closes the env sessions in their sandboxes but
leaves their records open for that answer; only a client's close (or the idle reaper) closes a
record, after which the id answers 404.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rockroll.api.auth import Principal
from rockroll.api.db import Database, SessionRecord
from rockroll.api.errors import ApiError, to_api_error
from rockroll.api.metrics import Metrics
from rockroll.sandbox.errors import SandboxLost
from rockroll.sandbox.node.agent import NodeAgent
from rockroll.sandbox.node.wire import step_answer
from rockroll.sandbox.session import RemoteSession, run_batch

__all__ = ["LiveSession", "SessionRegistry", "new_session_id"]


@dataclass
class LiveSession:
    """One open session."""

    id: str
    owner: str
    env_id: str
    kwargs: dict[str, Any]
    remote: Any
    created_at: float = field(default_factory=time.time)
    steps: int = 0
    last_used: float = field(default_factory=time.monotonic)
    node: str = ""  # the node agent serving it ("" when none: stepped through the control plane only)
    entry: Any = None  # its AgentSession on the embedded node agent (steps numbered there)

    @property
    def sandbox_id(self) -> str:
        return self.remote.sandbox_id

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "owner": self.owner,
            "env": self.env_id,
            "sandbox_id": self.sandbox_id,
            "steps": self.steps,
            "created_at": self.created_at,
            "system_prompt": self.remote.system_prompt(),
        }


class SessionRegistry:
    """Open, find, play, fork and close sessions (ownership checked on every lookup)."""

    def __init__(
        self,
        db: Database,
        open_env: Callable[..., RemoteSession],
        metrics: Metrics,
        *,
        place: Callable[[str, str, dict[str, Any], str], tuple[Any, str]] | None = None,
        agent: NodeAgent | None = None,
    ) -> None:
        self.db = db
        self.open_env = open_env
        self.metrics = metrics
        self.place = place  # (session id, env, kwargs, owner) -> (remote, node id): picks a node agent
        self.agent = agent  # the embedded node agent: sessions on this server's sandboxes are served by it
        self._live: dict[str, LiveSession] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="batch")
        self._stop = threading.Event()

    def __len__(self) -> int:
        return len(self._live)

    # ------------------------------------------------------------ lookup
    def get(self, session_id: str, who: Principal, *, lost_ok: bool = False) -> LiveSession:
        """The session, or 404 when it does not exist or belongs to someone else; 410 when lost
        (``lost_ok``: a session whose node agent was lost is returned, e.g. to be closed)."""
        live = self._live.get(session_id)
        if live is not None and who.can_see(live.owner):
            if not lost_ok and getattr(live.remote, "lost_reason", ""):  # its node agent was declared lost
                raise _node_lost(live)
            live.last_used = time.monotonic()
            return live
        if live is None:
            with self.db.session() as s:
                rec = s.get(SessionRecord, session_id)
            if rec is not None and who.can_see(rec.owner) and rec.closed_at is None:
                raise ApiError(
                    410,
                    "sandbox_lost",
                    "the server that held this session restarted, and its env state went with it; open a new session",
                    {"sandbox_id": rec.sandbox_id, "session_id": session_id, "reason": "server_restart"},
                )
        raise ApiError(404, "session_not_found", f"no session {session_id!r}")

    def list(self, who: Principal) -> list[LiveSession]:
        """Open sessions the caller may see."""
        return [s for s in list(self._live.values()) if who.can_see(s.owner)]

    # ------------------------------------------------------------- calls
    def open(self, who: Principal, env: str, kwargs: dict[str, Any]) -> LiveSession:
        """Place a new session on a node agent (``place``), or on this server's sandboxes (``open_env``)."""
        session_id = new_session_id()
        if self.place is not None:
            remote, node = self.place(session_id, env, kwargs, who.owner)
        else:
            remote, node = self.open_env(env, kwargs, owner=who.owner), ""  # a sandbox serving who.owner only
        return self._add(who.owner, remote.env_id or env, kwargs, remote, session_id=session_id, node=node)

    def _add(
        self, owner: str, env_id: str, kwargs: dict[str, Any], remote: Any, *, session_id: str = "", node: str = ""
    ) -> LiveSession:
        session_id = session_id or getattr(remote, "control_id", "") or new_session_id()
        live = LiveSession(id=session_id, owner=owner, env_id=env_id, kwargs=kwargs, remote=remote, node=node)
        try:
            with self.db.session() as s:
                s.add(
                    SessionRecord(
                        id=live.id,
                        owner=owner,
                        env_id=env_id,
                        kwargs=kwargs,
                        sandbox_id=remote.sandbox_id,
                        created_at=live.created_at,
                    )
                )
        except BaseException:
            remote.close()
            raise
        if self.agent is not None and isinstance(remote, RemoteSession):  # on this server's sandboxes
            live.entry = self.agent.attach(live.id, owner, remote)
            live.node = self.agent.id
        with self._lock:
            self._live[live.id] = live
        return live

    def reset(self, live: LiveSession, seed: int | None, options: dict[str, Any] | None) -> tuple[str, dict]:
        """Reset the env of ``live``."""
        with _lost_guard(live):
            return live.remote.reset(seed=seed, options=options)

    def step(self, live: LiveSession, action: str) -> tuple[str, float, bool, bool, dict]:
        """Step the env of ``live`` (counted and timed for /metrics)."""
        live.last_used = time.monotonic()
        t0 = time.perf_counter()
        with _lost_guard(live):
            if live.entry is not None:  # numbered with the data plane's steps (rockroll.sandbox.node.sequence)
                a = self.agent.step(live.entry, action)
                out = (a["observation"], a["reward"], a["terminated"], a["truncated"], a["info"])
            else:
                out = live.remote.step(action)
        live.steps += 1
        self.metrics.observe_step(time.perf_counter() - t0)
        return out

    def fork(self, live: LiveSession) -> LiveSession:
        """A new session continuing from ``live``."""
        with _lost_guard(live):
            remote = live.remote.fork()
        return self._add(live.owner, live.env_id, live.kwargs, remote, node=live.node)

    def action_candidates(self, live: LiveSession) -> list[str]:
        with _lost_guard(live):
            return list(live.remote.action_candidates())

    def get_state(self, live: LiveSession) -> dict[str, Any]:
        with _lost_guard(live):
            return live.remote.get_state()

    def set_state(self, live: LiveSession, state: dict[str, Any]) -> None:
        with _lost_guard(live):
            live.remote.set_state(state)

    def batch(self, who: Principal, items: list[tuple[str, str, str, int | None]]) -> list[dict[str, Any]]:
        """Run ``(session_id, op, action, seed)`` items; ``op`` is ``step`` or ``reset``.

        Items are grouped by sandbox; each group runs in order on one worker, groups run in
        parallel (so sessions spread over several sandboxes use several cores). Each result is
        the step/reset answer or ``{"error": {...}, "status": N}``.
        """
        results: list[dict[str, Any]] = [{} for _ in items]
        groups: dict[str, list[int]] = {}
        for i, (sid, _op, _action, _seed) in enumerate(items):
            try:
                live = self.get(sid, who)
            except ApiError as e:
                results[i] = _error_item(e)
                continue
            groups.setdefault(live.sandbox_id, []).append(i)

        def run(indices: list[int]) -> None:
            """One sandbox's items in one round trip (see ``sandbox.session.run_batch``)."""
            lives = [self._live.get(items[i][0]) for i in indices]
            todo = [(i, live) for i, live in zip(indices, lives, strict=False) if live is not None]
            for i, live in zip(indices, lives, strict=False):
                if live is None:  # closed since the lookup above
                    results[i] = _error_item(ApiError(404, "not_found", f"no session {items[i][0]}", {}))
            wire = [
                (live.remote, items[i][1], {"action": items[i][2]} if items[i][1] == "step" else {"seed": items[i][3]})
                for i, live in todo
            ]
            t0 = time.perf_counter()
            answers = _numbered_batch(todo, items, wire)
            per_item = (time.perf_counter() - t0) / max(1, len(wire))
            for (i, live), answer in zip(todo, answers, strict=True):
                live.last_used = time.monotonic()
                if isinstance(answer, Exception):
                    results[i] = _error_item(_batch_error(live, answer))
                elif items[i][1] == "reset":
                    results[i] = {"observation": answer[0], "info": answer[1]}
                else:
                    live.steps += 1
                    self.metrics.observe_step(per_item)
                    obs, reward, term, trunc, info = answer
                    results[i] = {
                        "observation": obs,
                        "reward": reward,
                        "terminated": term,
                        "truncated": trunc,
                        "info": info,
                    }

        chunks = list(groups.values())
        if len(chunks) <= 1:
            for chunk in chunks:
                run(chunk)
        else:
            for f in [self._pool.submit(run, chunk) for chunk in chunks]:
                f.result()
        return results

    def close(self, live: LiveSession) -> None:
        """Close a session and record its end and step count."""
        with self._lock:
            self._live.pop(live.id, None)
        if live.entry is not None:
            self.agent.detach(live.id)
        live.remote.close()
        with self.db.session() as s:
            rec = s.get(SessionRecord, live.id)
            if rec is not None:
                rec.closed_at = time.time()
                rec.steps = live.steps

    def reap_idle(self, ttl_s: float) -> int:
        """Close sessions unused for ``ttl_s`` seconds; return how many were closed."""
        cutoff = time.monotonic() - ttl_s
        idle = [live for live in list(self._live.values()) if _last_used(live) < cutoff]
        for live in idle:
            try:
                self.close(live)
            except Exception:  # noqa: BLE001 - a failed close must not stop the reaper
                continue
        return len(idle)

    def start_reaper(self, ttl_s: float, interval_s: float = 30.0) -> None:
        """Run :meth:`reap_idle` every ``interval_s`` seconds on a daemon thread."""

        def loop() -> None:
            while not self._stop.wait(interval_s):
                self.reap_idle(ttl_s)

        threading.Thread(target=loop, name="session-reaper", daemon=True).start()

    def close_all(self) -> None:
        """Server shutdown: close every env session in its sandbox, leaving its record open (so 410 later)."""
        self._stop.set()
        for live in list(self._live.values()):
            with self._lock:
                self._live.pop(live.id, None)
            if live.entry is not None:
                self.agent.detach(live.id)
            try:
                live.remote.close()
                with self.db.session() as s:
                    rec = s.get(SessionRecord, live.id)
                    if rec is not None:
                        rec.steps = live.steps
            except Exception:  # noqa: BLE001 - shutting down
                pass
        self._pool.shutdown(wait=False, cancel_futures=True)


def _last_used(live: LiveSession) -> float:
    """When ``live`` was last used on either plane (steps at a node agent do not pass here)."""
    if live.entry is not None:  # the embedded agent's record
        live.last_used = max(live.last_used, live.entry.last_used)
    elif hasattr(live.remote, "idle_s") and live.last_used < time.monotonic() - 1.0:
        try:  # a standalone agent's record, asked only of sessions idle here
            live.last_used = max(live.last_used, time.monotonic() - float(live.remote.idle_s()))
        except Exception:  # noqa: BLE001 - an agent that does not answer: the session counts as idle
            pass
    return live.last_used


def new_session_id() -> str:
    return f"se-{secrets.token_hex(8)}"


def _numbered_batch(todo: list[tuple[int, LiveSession]], items: list[tuple], wire: list[tuple]) -> list[Any]:
    """``run_batch(wire)`` holding the step logs of the embedded agent's sessions, their steps recorded.

    Sessions on other node agents (not ``RemoteSession``) are played one call each.
    """
    if not all(isinstance(w[0], RemoteSession) for w in wire):
        return [_one(remote, op, args) for remote, op, args in wire]
    logs = sorted({id(live.entry.log): live.entry.log for _i, live in todo if live.entry is not None}.values(),
                  key=lambda log: log.session_id)  # fmt: skip
    for log in logs:
        log.lock.acquire()
    try:
        answers = run_batch(wire)
        for (i, live), answer in zip(todo, answers, strict=True):
            if live.entry is not None and items[i][1] == "step":
                n = live.entry.log.last + 1
                live.entry.log.record(n, answer if isinstance(answer, Exception) else step_answer(answer, n))
                if not isinstance(answer, Exception):
                    live.entry.steps += 1
        return answers
    finally:
        for log in logs:
            log.lock.release()


def _one(remote: Any, op: str, args: dict[str, Any]) -> Any:
    try:
        return remote.step(args["action"]) if op == "step" else remote.reset(seed=args.get("seed"))
    except Exception as e:  # noqa: BLE001 - an answer, like run_batch's
        return e


def _error_item(e: ApiError) -> dict[str, Any]:
    return {"error": {"code": e.code, "message": e.message, "details": e.details}, "status": e.status}


def _batch_error(live: LiveSession, e: Exception) -> ApiError:
    """The API error for one failed batch item (the same mapping as a single call's)."""
    try:
        with _lost_guard(live):
            raise e
    except ApiError as mapped:
        return mapped
    except Exception as other:  # noqa: BLE001 - mapped below, never a 500 for one item
        mapped = to_api_error(other)
        if mapped is None:
            return ApiError(502, "sandbox_error", f"{type(other).__name__}: {other}", {"session_id": live.id})
        return mapped


@contextmanager
def _lost_guard(live: LiveSession) -> Iterator[None]:
    """Turn a lost sandbox into ``410 sandbox_lost`` with the session's sandbox id."""
    try:
        yield
    except SandboxLost as e:
        if getattr(live.remote, "lost_reason", ""):
            raise _node_lost(live) from e
        details = {"sandbox_id": live.sandbox_id, "session_id": live.id}
        raise ApiError(410, "sandbox_lost", str(e), details) from e


def _node_lost(live: LiveSession) -> ApiError:
    """``410 session_lost``: the node agent serving ``live`` died (its reason in the message)."""
    details = {"session_id": live.id, "node": live.node, "sandbox_id": live.sandbox_id, "reason": "node_lost"}
    return ApiError(410, "session_lost", f"{live.remote.lost_reason}; open a new session", details)
