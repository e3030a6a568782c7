"""The node agent's batch calls: many sessions' steps and resets in one request (``POST /v1/node/step``).

:class:`BatchCalls` is a part of :class:`rockroll.sandbox.node.agent.NodeAgent`: on the event loop
(:meth:`BatchCalls.abatch`) the items go over their sandboxes' channels, one frame per sandbox; where
a session is busy on another path or its sandbox has no channel, they run on a worker thread over the
sandbox's HTTP socket (:meth:`BatchCalls.batch`). Each item is numbered under its session's step log
and answered on its own (an error answers only its item). Also the checks every call's arguments get.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from rockroll.envs.action_wire import MAX_ACTION_CHARS, read_action, wire_action
from rockroll.envs.errors import ActionTypeError
from rockroll.envs.json_types import JSONObject, JSONValue
from rockroll.sandbox.errors import SandboxLost, SandboxTimeout
from rockroll.sandbox.node.channel import CallTimeout, ChannelClosed, answer_of
from rockroll.sandbox.node.sequence import StepLog
from rockroll.sandbox.node.wire import ErrorAnswer, WireError, error_answer, replayed, reset_answer, step_answer
from rockroll.sandbox.session import EnvSession, RemoteSession, run_batch

if TYPE_CHECKING:
    from rockroll.sandbox.node.channel import SandboxChannel
    from rockroll.sandbox.node.tokens import SessionClaims


@dataclass
class AgentSession:
    """One session on this agent."""

    id: str
    owner: str
    remote: RemoteSession  # the session's handle in its sandbox (an EnvSession whose channel the agent finds)
    log: StepLog
    steps: int = 0
    last_used: float = field(default_factory=time.monotonic)
    # its sandbox's channel on the agent's event loop (None: not looked up yet; False: it has none)
    channel: SandboxChannel | Literal[False] | None = None


__all__ = ["AgentSession", "BatchCalls", "MAX_ACTION_CHARS", "CALL_TIMEOUT_S"]

CALL_TIMEOUT_S = 60.0
"""How long a step, a reset or a whole batch waits for its sandbox on the event loop's path."""


#: a checked batch item: (its index, its session, the item)
_Item = tuple[int, AgentSession, JSONObject]
#: a batch's answers, one per item (an item's error answers it alone)
_Results = list[JSONObject | ErrorAnswer]


class BatchCalls:
    """The batch calls of a :class:`~rockroll.sandbox.node.agent.NodeAgent` (see the module docstring)."""

    if TYPE_CHECKING:  # NodeAgent's own

        def authorise(self, token: str, session_id: str | None = None) -> tuple[AgentSession, SessionClaims]: ...

        async def _channel(self, entry: AgentSession) -> SandboxChannel | None: ...

    async def abatch(self, items: list[JSONValue]) -> _Results:
        """:meth:`batch` from the event loop: the items of each sandbox go over its channel (one frame,
        as they are queued together); on a thread where a session is busy or a sandbox has no channel."""
        results, todo = self._prepare(items)
        if not todo:
            return results
        held: list[AgentSession] = []
        try:
            for _i, entry, _item in todo:
                if not entry.log.lock.acquire(blocking=False):
                    break
                held.append(entry)
            if len(held) == len(todo):
                channels = [await self._channel(entry) for _i, entry, _item in todo]
                found = [channel for channel in channels if channel is not None]
                if len(found) == len(channels):
                    await self._arun_locked(todo, found, results)
                    return results
        finally:
            for entry in held:
                entry.log.lock.release()
        return await asyncio.get_running_loop().run_in_executor(None, self._batch_prepared, todo, results)

    async def _arun_locked(
        self,
        todo: list[_Item],
        channels: list[SandboxChannel],
        results: _Results,
    ) -> None:
        """Run checked batch items whose sessions' logs are held, over their sandboxes' channels."""
        # (result index, entry, step number or 0 for a reset, future of the answer)
        calls: list[tuple[int, AgentSession, int, asyncio.Future[JSONValue]]] = []
        now = time.monotonic()
        for (i, entry, item), channel in zip(todo, channels, strict=True):
            entry.last_used = now
            remote = entry.remote
            n: int | None = 0
            try:
                if item.get("op", "step") == "reset":
                    remote.check()
                    args: JSONObject = {"session_id": remote.session_id, "seed": item.get("seed"), "options": None}
                    calls.append((i, entry, 0, channel.submit("env.reset", args, CALL_TIMEOUT_S)))
                    continue
                n = _step_number(entry, item, results, i)
                if n is None:
                    continue
                remote.check()
                args = {"session_id": remote.session_id, "action": _check_action(item.get("action"))}
                calls.append((i, entry, n, channel.submit("env.step", args, CALL_TIMEOUT_S)))
            except Exception as e:  # noqa: BLE001 - one bad item spoils no other
                if n:
                    entry.log.record(n, e)
                results[i] = error_answer(e)
        answers: list[JSONValue | ChannelClosed | CallTimeout] = []
        cancelled: BaseException | None = None
        for _i, _entry, _n, future in calls:
            try:
                answers.append(await future)
            except (ChannelClosed, CallTimeout) as e:
                answers.append(e)
            except asyncio.CancelledError as e:  # the answers that came are recorded, then the cancel goes on
                cancelled = e
                break
        for k, (i, entry, n, _future) in enumerate(calls):
            remote = entry.remote
            if k >= len(answers):  # cancelled first: the step may have run; a replay must not run it again
                if n:
                    entry.log.record(n, _interrupted(entry))
                continue
            try:
                answer = answers[k]
                if isinstance(answer, CallTimeout):
                    raise SandboxTimeout(
                        f"sandbox {remote.sandbox_id} did not answer a batch within {CALL_TIMEOUT_S:.1f}s",
                        sandbox_id=remote.sandbox_id, timeout_s=CALL_TIMEOUT_S,
                    ) from answer  # fmt: skip
                if isinstance(answer, ChannelClosed):
                    remote.sandbox.report_failure()
                    raise SandboxLost(remote.sandbox_id, "the sandbox's channel dropped during a batch") from answer
                out = answer_of(remote, answer)
            except Exception as e:  # noqa: BLE001 - answered per item
                if n:
                    entry.log.record(n, e)
                results[i] = error_answer(e)
                continue
            if n == 0:
                results[i] = reset_answer(out)
            else:
                results[i] = answer = step_answer(out, n)
                entry.log.record(n, answer)
                entry.steps += 1
        if cancelled is not None:
            raise cancelled

    def batch(self, items: list[JSONValue]) -> _Results:
        """Steps (or resets) of several sessions, one round trip per sandbox; each item answered or errored.

        Each item is ``{"token", "op": "step" | "reset", "seq", "action", "seed"}``; a session may
        appear once. Items are numbered like single steps (replays answer the recorded step).
        """
        results, todo = self._prepare(items)
        return self._batch_prepared(todo, results)

    def _prepare(self, items: list[JSONValue]) -> tuple[_Results, list[_Item]]:
        """Authorise and check the items of a batch: ``(results, todo)``, refused items answered in
        ``results``, the others in ``todo`` in session order (locks are taken in one order: no two
        batches deadlock)."""
        results: _Results = [{} for _ in items]
        todo: list[_Item] = []
        seen: set[str] = set()
        for i, item in enumerate(items):
            try:
                if not isinstance(item, dict):
                    raise WireError(422, "validation_error", "each batch item must be an object")
                token = item.get("token", "")
                entry, _claims = self.authorise(token if isinstance(token, str) else "")
                if entry.id in seen:
                    raise WireError(400, "bad_request", "each session may appear once per batch")
                if item.get("op", "step") not in ("step", "reset"):
                    raise WireError(422, "validation_error", "a batch item's 'op' must be step or reset")
                seen.add(entry.id)
                todo.append((i, entry, item))
            except Exception as e:  # noqa: BLE001 - one bad item spoils no other
                results[i] = error_answer(e)
        todo.sort(key=lambda t: t[1].id)
        return results, todo

    def _batch_prepared(self, todo: list[_Item], results: _Results) -> _Results:
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

    def _run_locked(self, todo: list[_Item], results: _Results) -> None:
        """Run checked batch items whose sessions' logs are held (see :meth:`batch`)."""
        wire: list[tuple[RemoteSession, str, JSONObject]] = []
        slots: list[tuple[int, AgentSession, int]] = []
        for i, entry, item in todo:
            entry.last_used = time.monotonic()
            try:
                if item.get("op", "step") == "reset":
                    wire.append((entry.remote, "reset", {"seed": item.get("seed"), "options": None}))
                    slots.append((i, entry, 0))
                    continue
                n = _step_number(entry, item, results, i)
                if n is None:
                    continue
                wire.append((entry.remote, "step", {"action": _check_action(item.get("action"))}))
                slots.append((i, entry, n))
            except Exception as e:  # noqa: BLE001 - one bad item spoils no other
                results[i] = error_answer(e)
        if not wire:
            return
        if all(isinstance(w[0], RemoteSession) for w in wire):
            answers = run_batch(wire)
        else:  # not a sandbox session: one call each
            answers = [_one(remote, op, args) for remote, op, args in wire]
        for (i, entry, n), answer in zip(slots, answers, strict=True):
            if n == 0:  # a reset
                results[i] = error_answer(answer) if isinstance(answer, Exception) else reset_answer(answer)
                continue
            if isinstance(answer, Exception):
                entry.log.record(n, answer)
                results[i] = error_answer(answer)
            else:
                results[i] = played = step_answer(answer, n)
                entry.log.record(n, played)
                entry.steps += 1


def _step_number(entry: AgentSession, item: JSONObject, results: _Results, i: int) -> int | None:
    """The step number of batch item ``i`` (its action checked); None when that number was applied before
    (``results[i]`` is then its recorded answer)."""
    _check_action(item.get("action"))
    n, recorded = entry.log.check(item.get("seq"))
    if recorded is None:
        return n
    results[i] = error_answer(recorded) if isinstance(recorded, BaseException) else replayed(recorded)
    return None


def _interrupted(entry: AgentSession) -> SandboxTimeout:
    return SandboxTimeout(
        f"the call on session {entry.id!r} was interrupted before its answer came; its outcome is unknown",
        sandbox_id=entry.remote.sandbox_id,
    )


def _check_action(action: object) -> str | JSONObject:
    """``action`` in its wire form when it is a step's action: the agent's text or ``{text, tool_calls}``
    (:func:`rockroll.envs.action_wire.read_action`; a 422 ``WireError`` naming the wrong field otherwise)."""
    try:
        return wire_action(action, max_chars=MAX_ACTION_CHARS)
    except ActionTypeError as e:
        raise WireError(422, "validation_error", str(e), {"field": e.field}) from e


def _check_reset(seed: object, options: object) -> tuple[int | None, dict[str, JSONValue] | None]:
    """``(seed, options)`` when they are a reset's (WireError otherwise)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32):
        raise WireError(422, "validation_error", "'seed' must be null or an int in [0, 2**32)")
    if options is not None and not isinstance(options, dict):
        raise WireError(422, "validation_error", "'options' must be null or an object")
    return seed, options


def _one(remote: object, op: str, args: JSONObject) -> object:
    """One step or reset on a session that is no sandbox's (a :class:`RemoteSession` is batched instead)."""
    try:
        if not isinstance(remote, EnvSession):
            raise TypeError(f"not a session: {type(remote).__name__}")
        if op == "step":
            return remote.step(read_action(_check_action(args.get("action"))))
        return remote.reset(seed=_check_reset(args.get("seed"), None)[0])
    except Exception as e:  # noqa: BLE001 - an answer like run_batch's
        return e
