"""A node agent's sessions: the table of env sessions it serves and the calls of the data plane.

One :class:`NodeAgent` per machine holds the env sessions placed on that machine's sandboxes,
each with its owner and its :class:`~rockroll.sandbox.node.sequence.StepLog`. Every step of a
session goes through that log, whether it comes from a client on the data plane (with a sequence
number) or from the control plane's proxied routes (without one), so numbering stays whole.

The agent has an id, an endpoint (the base URL of its data plane) and a capacity (most sessions);
the control plane keeps a table of agents with these (``api/nodes/table.py``). It also holds the ids
of revoked API tokens (:meth:`NodeAgent.revoke`, told by the control plane): a session token asked
with one of them is refused, and the data-plane sockets opened with one are closed at once. Sessions are attached by
whoever opened them: the control plane's placement for the embedded agent, the agent's own
:class:`~rockroll.sandbox.node.host.NodeHost` for a standalone ``rockroll node``.

On the event loop (:meth:`NodeAgent.acall`, :meth:`NodeAgent.abatch`) steps and resets go over
their sandbox's channel (:mod:`rockroll.sandbox.node.channel`), one per sandbox: the calls of all
the sessions of a sandbox made in one turn of the loop travel in one frame. Where a session is
busy on another path (its log's lock is held) or its sandbox has no channel, the call runs on a
worker thread over the sandbox's HTTP socket instead.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from typing import cast

from rockroll.envs.action_wire import read_action, tools_to_wire
from rockroll.envs.json_types import JSONObject, JSONValue
from rockroll.envs.tools import ToolAction
from rockroll.sandbox.node.agent_batch import (
    CALL_TIMEOUT_S,
    MAX_ACTION_CHARS,
    AgentSession,
    BatchCalls,
    _check_action,
    _check_reset,
    _interrupted,
)
from rockroll.sandbox.node.channel import (
    Channels,
    SandboxChannel,
)
from rockroll.sandbox.node.sequence import StepLog
from rockroll.sandbox.node.tokens import SessionClaims, SessionTokens, TokenInvalid, TokenRevoked
from rockroll.sandbox.node.wire import NodeSessionNotFound, WireError, replayed, reset_answer, step_answer
from rockroll.sandbox.session import RemoteSession

__all__ = ["AgentSession", "NodeAgent", "MAX_ACTION_CHARS"]


class NodeAgent(BatchCalls):
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
        self._channels: Channels | None = None  # the sandboxes' channels, on the event loop that serves the data plane

    def __len__(self) -> int:
        return len(self._sessions)

    def session_ids(self) -> list[str]:
        """The ids of the sessions held now (the control plane reconciles its rows against them)."""
        return list(self._sessions)

    def info(self) -> JSONObject:
        return {"id": self.id, "endpoint": self.endpoint, "capacity": self.capacity, "sessions": len(self)}

    # ------------------------------------------------------------ table
    def attach(self, session_id: str, owner: str, remote: RemoteSession) -> AgentSession:
        """Serve ``remote`` as ``session_id`` of ``owner`` from now on."""
        entry = AgentSession(session_id, owner, remote, StepLog(session_id, owner=owner))
        with self._lock:
            self._sessions[session_id] = entry
        return entry

    def detach(self, session_id: str) -> AgentSession | None:
        """Stop serving a session (its env is the caller's to close; its sandbox's channel stays for the others)."""
        with self._lock:
            return self._sessions.pop(session_id, None)

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

    def check(self, token: str) -> SessionClaims:
        """The claims of ``token`` when it is a live session token of this agent: signed with the secret,
        unexpired, for this node, its API token not revoked (:class:`TokenInvalid`, :class:`TokenExpired`
        or :class:`TokenRevoked` otherwise, 401). No session need be held: ``POST /v1/node/step`` asks
        this of its ``Authorization`` header before it reads a byte of the body."""
        claims = self.tokens.verify(token)
        self.revoke_check(claims)
        if claims.node_id != self.id:
            raise TokenInvalid(f"the session token is for node {claims.node_id!r}, not this one ({self.id!r})")
        return claims

    def authorise(self, token: str, session_id: str | None = None) -> tuple[AgentSession, SessionClaims]:
        """The session ``token`` opens and its claims (401: a bad or revoked token; 404: no session of its owner here)."""
        claims = self.check(token)
        if session_id is not None and claims.session_id != session_id:
            raise NodeSessionNotFound(session_id)
        entry = self._sessions.get(claims.session_id)
        if entry is None or entry.owner != claims.owner:
            raise NodeSessionNotFound(claims.session_id)
        return entry, claims

    # ------------------------------------------------------------ calls
    def step(self, entry: AgentSession, action: JSONValue | ToolAction, seq: JSONValue = None) -> JSONObject:
        """Step ``entry`` as number ``seq`` (next when None); a replayed number answers the recorded step.

        ``action``: the agent's text, or a turn with tool calls (a :class:`~rockroll.envs.tools.ToolAction` or
        its wire form ``{text, tool_calls}``).
        """
        played = read_action(_check_action(action))
        entry.last_used = time.monotonic()

        def play() -> JSONObject:
            answer = step_answer(entry.remote.step(played), entry.log.last + 1)
            entry.steps += 1
            return answer

        answer, again = entry.log.run(seq, play)
        return replayed(answer) if again else answer

    def reset(self, entry: AgentSession, seed: JSONValue = None, options: JSONValue = None) -> JSONObject:
        seed, options = _check_reset(seed, options)
        entry.last_used = time.monotonic()
        with entry.log.lock:
            return reset_answer(entry.remote.reset(seed=seed, options=options))

    def call(self, entry: AgentSession, msg: JSONValue) -> JSONObject:
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
        if op == "tools":
            return {"tools": cast(JSONValue, tools_to_wire(entry.remote.tools))}
        if op == "seq":
            return {"last_seq": entry.log.last}
        raise WireError(422, "validation_error", "'op' must be one of step, reset, state, actions, tools, seq")

    # ------------------------------------------------- the event loop's path
    async def acall(self, entry: AgentSession, msg: JSONValue) -> JSONObject:
        """:meth:`call` from the event loop: steps and resets over the sandbox's channel, the rest on a thread."""
        op = msg.get("op") if isinstance(msg, dict) else None
        if isinstance(msg, dict) and (op == "step" or op == "reset") and entry.log.lock.acquire(blocking=False):
            try:
                channel = await self._channel(entry)
                if channel is not None:
                    if op == "step":
                        return await self._astep(entry, channel, msg.get("action"), msg.get("seq"))
                    seed, options = _check_reset(msg.get("seed"), msg.get("options"))
                    entry.last_used = time.monotonic()
                    out = await channel.call(entry.remote, "env.reset", CALL_TIMEOUT_S, seed=seed, options=options)
                    return reset_answer(out)
            finally:
                entry.log.lock.release()
        return await asyncio.get_running_loop().run_in_executor(None, self.call, entry, msg)

    async def _channel(self, entry: AgentSession) -> SandboxChannel | None:
        """The channel of ``entry``'s sandbox on the running loop (None: step it over HTTP on a thread)."""
        channel = entry.channel
        if channel is False:
            return None
        loop = asyncio.get_running_loop()
        if channel is not None and not channel.closed and channel.loop is loop:
            return channel
        channels = self._channels
        if channels is None or channels.loop is not loop:
            channels = self._channels = Channels()
        found = await channels.get(entry.remote)
        if found is None:
            entry.channel = False
            return None
        if entry.channel is None:  # the session's HTTP connection idles from now on: free its server thread
            entry.remote.client.close()  # (it reconnects for the next call that needs it)
        entry.channel = found
        return found

    async def _astep(
        self, entry: AgentSession, channel: SandboxChannel, action: JSONValue, seq: JSONValue
    ) -> JSONObject:
        """A numbered step over ``channel`` (the log's lock is held by the caller)."""
        action = _check_action(action)
        entry.last_used = time.monotonic()
        log = entry.log
        n, recorded = log.check(seq)
        if recorded is not None:
            if isinstance(recorded, BaseException):
                raise recorded
            return replayed(recorded)
        try:
            out = await channel.call(entry.remote, "env.step", CALL_TIMEOUT_S, action=action)
        except Exception as e:
            log.record(n, e)
            raise
        except BaseException:  # cancelled: the step may have run; a replay of its number must not run it again
            log.record(n, _interrupted(entry))
            raise
        answer = step_answer(out, n)
        log.record(n, answer)
        entry.steps += 1
        return answer
