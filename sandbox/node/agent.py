"""A node agent's sessions: the table of env sessions it serves and the calls of the data plane.

One :class:`NodeAgent` per machine holds the env sessions placed on that machine's sandboxes,
each with its owner and its :class:`~rockroll.sandbox.node.sequence.StepLog`. Every step of a
session goes through that log, whether it comes from a client on the data plane (with a sequence
number) or from the control plane's proxied routes (without one), so numbering stays whole.

The agent has an id, an endpoint (the base URL of its data plane) and a capacity (most sessions);
the control plane keeps a table of agents with these (``api/nodes.py``). It also holds the ids
of revoked API tokens (:meth:`NodeAgent.revoke`, told by the control plane): a session token asked
with one of them is refused, and the data-plane sockets opened with one are closed at once. Sessions are attached by
whoever opened them: the control plane's placement for the embedded agent, the agent's own
:class:`~rockroll.sandbox.node.host.NodeHost` for a standalone ``rockroll node``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rockroll.sandbox.node.channel import open_channel
from rockroll.sandbox.node.sequence import StepLog
from rockroll.sandbox.node.tokens import SessionClaims, SessionTokens, TokenInvalid, TokenRevoked
from rockroll.sandbox.node.wire import NodeSessionNotFound, WireError, error_answer, step_answer
from rockroll.sandbox.session import RemoteSession, run_batch

__all__ = ["AgentSession", "NodeAgent", "MAX_ACTION_CHARS"]

MAX_ACTION_CHARS = 100_000


@dataclass
class AgentSession:
    """One session on this agent."""

    id: str
    owner: str
    remote: Any  # a RemoteSession (anything with the text-env calls)
    log: StepLog
    steps: int = 0
    last_used: float = field(default_factory=time.monotonic)
    channel: Any = None  # its SessionChannel on the agent's event loop (None: not opened yet; False: none)


class NodeAgent:
    """The sessions of one machine and the data-plane calls on them (thread-safe)."""

    def __init__(self, node_id: str, tokens: SessionTokens, *, capacity: int, endpoint: str = "") -> None:
        self.id = node_id
        self.tokens = tokens
        self.capacity = capacity
        self.endpoint = endpoint
        self._sessions: dict[str, AgentSession] = {}
        self._lock = threading.Lock()
        self.revoked: frozenset[str] = frozenset()  # ids of revoked API tokens
        self._sockets: dict[str, dict[int, Callable[[], None]]] = {}  # API token id -> open sockets' closers

    def __len__(self) -> int:
        return len(self._sessions)

    def info(self) -> dict[str, Any]:
        return {"id": self.id, "endpoint": self.endpoint, "capacity": self.capacity, "sessions": len(self)}

    # ------------------------------------------------------------ table
    def attach(self, session_id: str, owner: str, remote: Any) -> AgentSession:
        """Serve ``remote`` as ``session_id`` of ``owner`` from now on."""
        entry = AgentSession(session_id, owner, remote, StepLog(session_id))
        with self._lock:
            self._sessions[session_id] = entry
        return entry

    def detach(self, session_id: str) -> AgentSession | None:
        """Stop serving a session (its env is the caller's to close; its channel is closed here)."""
        with self._lock:
            entry = self._sessions.pop(session_id, None)
        if entry is not None and entry.channel:
            channel, entry.channel = entry.channel, False
            channel.close_soon()
        return entry

    def get(self, session_id: str) -> AgentSession:
        entry = self._sessions.get(session_id)
        if entry is None:
            raise NodeSessionNotFound(session_id)
        return entry

    # ------------------------------------------------------- revocation
    def revoke(self, token_ids: Iterable[str]) -> int:
        """Refuse session tokens asked with these API tokens from now on and close their open sockets
        (each closer is called once); return how many sockets were closed."""
        new = frozenset(token_ids) - self.revoked
        if not new:
            return 0
        with self._lock:
            self.revoked = self.revoked | new
            closers = [c for tid in new for c in self._sockets.pop(tid, {}).values()]
        for close in closers:
            close()
        return len(closers)

    def watch_socket(self, claims: SessionClaims, close: Callable[[], None]) -> Callable[[], None]:
        """Call ``close`` when the API token behind ``claims`` is revoked; returns the un-watch function."""
        if not claims.token_id:
            return lambda: None
        key = id(close)
        with self._lock:  # revoke() swaps the set and takes the closers under this lock: no revocation slips by
            revoked = claims.token_id in self.revoked
            if not revoked:
                self._sockets.setdefault(claims.token_id, {})[key] = close
        if revoked:
            close()
            return lambda: None

        def unwatch() -> None:
            with self._lock:
                self._sockets.get(claims.token_id, {}).pop(key, None)
                if not self._sockets.get(claims.token_id, True):
                    del self._sockets[claims.token_id]

        return unwatch

    def revoke_check(self, claims: SessionClaims) -> None:
        """Raise :class:`TokenRevoked` when the API token behind ``claims`` was revoked."""
        if claims.token_id and claims.token_id in self.revoked:
            raise TokenRevoked("the API token this session token was asked with has been revoked")

    def authorise(self, token: str, session_id: str | None = None) -> tuple[AgentSession, SessionClaims]:
        """The session ``token`` opens and its claims (401: a bad or revoked token; 404: no session of its owner here)."""
        claims = self.tokens.verify(token)
        self.revoke_check(claims)
        if claims.node_id != self.id:
            raise TokenInvalid(f"the session token is for node {claims.node_id!r}, not this one ({self.id!r})")
        if session_id is not None and claims.session_id != session_id:
            raise NodeSessionNotFound(session_id)
        entry = self._sessions.get(claims.session_id)
        if entry is None or entry.owner != claims.owner:
            raise NodeSessionNotFound(claims.session_id)
        return entry, claims

    # ------------------------------------------------------------ calls
    def step(self, entry: AgentSession, action: Any, seq: int | None = None) -> dict[str, Any]:
        """Step ``entry`` as number ``seq`` (next when None); a replayed number answers the recorded step."""
        if not isinstance(action, str) or len(action) > MAX_ACTION_CHARS:
            raise WireError(
                422, "validation_error", f"'action' must be a string of at most {MAX_ACTION_CHARS} characters"
            )
        entry.last_used = time.monotonic()

        def play() -> dict[str, Any]:
            answer = step_answer(entry.remote.step(action), entry.log.last + 1)
            entry.steps += 1
            return answer

        answer, replayed = entry.log.run(seq, play)
        return answer | {"replayed": True} if replayed else answer

    def reset(self, entry: AgentSession, seed: Any = None, options: Any = None) -> dict[str, Any]:
        _check_reset(seed, options)
        entry.last_used = time.monotonic()
        with entry.log.lock:
            obs, info = entry.remote.reset(seed=seed, options=options)
        return {"observation": obs, "info": info}

    def call(self, entry: AgentSession, msg: Any) -> dict[str, Any]:
        """One data-plane message ``{"op": step | reset | state | actions | seq, ...}`` (``seq``: the last step's number)."""
        if not isinstance(msg, dict):
            raise WireError(422, "validation_error", "a message must be a JSON object with an 'op'")
        op = msg.get("op")
        if op == "step":
            return self.step(entry, msg.get("action"), msg.get("seq"))
        if op == "reset":
            return self.reset(entry, msg.get("seed"), msg.get("options"))
        if op == "state":
            return {"state": entry.remote.get_state()}
        if op == "actions":
            return {"actions": list(entry.remote.action_candidates())}
        if op == "seq":
            return {"last_seq": entry.log.last}
        raise WireError(422, "validation_error", "'op' must be one of step, reset, state, actions, seq")

    # ------------------------------------------------- the event loop's path
    async def acall(self, entry: AgentSession, msg: Any) -> dict[str, Any]:
        """:meth:`call` from the event loop: steps and resets over the session's channel, the rest on a thread."""
        op = msg.get("op") if isinstance(msg, dict) else None
        if op in ("step", "reset") and entry.log.lock.acquire(blocking=False):
            try:
                channel = await self._channel(entry)
                if channel is not None:
                    if op == "step":
                        return await self._astep(entry, channel, msg.get("action"), msg.get("seq"))
                    seed, options = msg.get("seed"), msg.get("options")
                    _check_reset(seed, options)
                    obs, info = await channel.call("env.reset", seed=seed, options=options)
                    return {"observation": obs, "info": info}
            finally:
                entry.log.lock.release()
        return await asyncio.get_running_loop().run_in_executor(None, self.call, entry, msg)

    async def _channel(self, entry: AgentSession) -> Any:
        if entry.channel is None:
            entry.channel = await open_channel(entry.remote) or False
            if entry.channel:  # the session's HTTP connection idles from now on: free its server thread
                entry.remote._client.close()  # (it reconnects for the next call that needs it)
        return entry.channel or None

    async def _astep(self, entry: AgentSession, channel: Any, action: Any, seq: Any) -> dict[str, Any]:
        """A numbered step over ``channel`` (the log's lock is held by the caller)."""
        _check_action(action)
        entry.last_used = time.monotonic()
        n, recorded = entry.log.check(seq)
        if recorded is not None:
            if isinstance(recorded, BaseException):
                raise recorded
            return recorded | {"replayed": True}
        try:
            out = await channel.call("env.step", action=action)
        except Exception as e:
            entry.log.record(n, e)
            raise
        answer = step_answer(tuple(out), n)
        entry.log.record(n, answer)
        entry.steps += 1
        return answer

    def batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Steps (or resets) of several sessions, one round trip per sandbox; each item answered or errored.

        Each item is ``{"token", "op": "step" | "reset", "seq", "action", "seed"}``; a session may
        appear once. Items are numbered like single steps (replays answer the recorded step).
        """
        results: list[dict[str, Any]] = [{} for _ in items]
        todo: list[tuple[int, AgentSession, dict[str, Any]]] = []
        seen: set[str] = set()
        for i, item in enumerate(items):
            try:
                if not isinstance(item, dict):
                    raise WireError(422, "validation_error", "each batch item must be an object")
                entry, _claims = self.authorise(item.get("token", ""))
                if entry.id in seen:
                    raise WireError(400, "bad_request", "each session may appear once per batch")
                if item.get("op", "step") not in ("step", "reset"):
                    raise WireError(422, "validation_error", "a batch item's 'op' must be step or reset")
                seen.add(entry.id)
                todo.append((i, entry, item))
            except Exception as e:  # noqa: BLE001 - one bad item spoils no other
                results[i] = error_answer(e)
        todo.sort(key=lambda t: t[1].id)  # locks in one order: no two batches deadlock
        held = []
        try:
            for _i, entry, _item in todo:
                entry.log.lock.acquire()
                held.append(entry)
            self._run_locked(todo, results)
        finally:
            for entry in held:
                entry.log.lock.release()
        return results

    def _run_locked(self, todo: list[tuple[int, AgentSession, dict[str, Any]]], results: list[dict[str, Any]]) -> None:
        """Run checked batch items whose sessions' logs are held (see :meth:`batch`)."""
        wire, slots = [], []
        for i, entry, item in todo:
            entry.last_used = time.monotonic()
            try:
                if item.get("op", "step") == "reset":
                    args = {"seed": item.get("seed"), "options": None}
                    wire.append((entry.remote, "reset", args))
                    slots.append((i, entry, 0))
                    continue
                action = item.get("action")
                if not isinstance(action, str) or len(action) > MAX_ACTION_CHARS:
                    raise WireError(422, "validation_error", "'action' must be a string")
                n, recorded = entry.log.check(item.get("seq"))
                if recorded is not None:
                    results[i] = (
                        error_answer(recorded) if isinstance(recorded, Exception) else recorded | {"replayed": True}
                    )
                    continue
                wire.append((entry.remote, "step", {"action": action}))
                slots.append((i, entry, n))
            except Exception as e:  # noqa: BLE001
                results[i] = error_answer(e)
        if not wire:
            return
        if all(isinstance(w[0], RemoteSession) for w in wire):
            answers = run_batch(wire)
        else:  # not a sandbox session: one call each
            answers = [_one(remote, op, args) for remote, op, args in wire]
        for (i, entry, n), answer in zip(slots, answers, strict=True):
            if n == 0:  # a reset
                results[i] = error_answer(answer) if isinstance(answer, Exception) else {
                    "observation": answer[0], "info": answer[1]}  # fmt: skip
                continue
            if isinstance(answer, Exception):
                entry.log.record(n, answer)
                results[i] = error_answer(answer)
            else:
                results[i] = step_answer(answer, n)
                entry.log.record(n, results[i])
                entry.steps += 1


def _check_action(action: Any) -> None:
    if not isinstance(action, str) or len(action) > MAX_ACTION_CHARS:
        raise WireError(422, "validation_error", f"'action' must be a string of at most {MAX_ACTION_CHARS} characters")


def _check_reset(seed: Any, options: Any) -> None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32):
        raise WireError(422, "validation_error", "'seed' must be null or an int in [0, 2**32)")
    if options is not None and not isinstance(options, dict):
        raise WireError(422, "validation_error", "'options' must be null or an object")


def _one(remote: Any, op: str, args: dict[str, Any]) -> Any:
    try:
        return remote.step(args["action"]) if op == "step" else remote.reset(seed=args.get("seed"))
    except Exception as e:  # noqa: BLE001 - an answer like run_batch's
        return e
