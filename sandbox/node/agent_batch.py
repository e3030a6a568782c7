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
from typing import TYPE_CHECKING, Any

from rockroll.sandbox.errors import SandboxLost, SandboxTimeout
from rockroll.sandbox.node.channel import CallTimeout, ChannelClosed, answer_of
from rockroll.sandbox.node.sequence import StepLog
from rockroll.sandbox.node.wire import WireError, error_answer, step_answer
from rockroll.sandbox.session import RemoteSession, run_batch

if TYPE_CHECKING:
    from rockroll.sandbox.node.channel import SandboxChannel


@dataclass
class AgentSession:
    """One session on this agent."""

    id: str
    owner: str
    remote: RemoteSession  # the session's handle in its sandbox (an EnvSession whose channel the agent finds)
    log: StepLog
    steps: int = 0
    last_used: float = field(default_factory=time.monotonic)
    channel: Any = None  # its sandbox's SandboxChannel on the agent's event loop (None: not looked up yet; False: none)


__all__ = ["AgentSession", "BatchCalls", "MAX_ACTION_CHARS", "CALL_TIMEOUT_S"]

MAX_ACTION_CHARS = 100_000
CALL_TIMEOUT_S = 60.0
"""How long a step, a reset or a whole batch waits for its sandbox on the event loop's path."""


class BatchCalls:
    """The batch calls of a :class:`~rockroll.sandbox.node.agent.NodeAgent` (see the module docstring)."""

    async def abatch(self, items: list[dict[str, object]]) -> list[dict[str, object]]:
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
                if None not in channels:
                    await self._arun_locked(todo, channels, results)
                    return results
        finally:
            for entry in held:
                entry.log.lock.release()
        return await asyncio.get_running_loop().run_in_executor(None, self._batch_prepared, todo, results)

    async def _arun_locked(
        self,
        todo: list[tuple[int, AgentSession, dict[str, object]]],
        channels: list[SandboxChannel | None],
        results: list[dict[str, object]],
    ) -> None:
        """Run checked batch items whose sessions' logs are held, over their sandboxes' channels."""
        calls = []  # (result index, entry, step number or 0 for a reset, future of the answer)
        now = time.monotonic()
        for (i, entry, item), channel in zip(todo, channels, strict=True):
            entry.last_used = now
            remote = entry.remote
            n = 0
            try:
                if item.get("op", "step") == "reset":
                    remote.check()
                    args = {"session_id": remote.session_id, "seed": item.get("seed"), "options": None}
                    calls.append((i, entry, 0, channel.submit("env.reset", args, CALL_TIMEOUT_S)))
                    continue
                n = _step_number(entry, item, results, i)
                if n is None:
                    continue
                remote.check()
                args = {"session_id": remote.session_id, "action": item["action"]}
                calls.append((i, entry, n, channel.submit("env.step", args, CALL_TIMEOUT_S)))
            except Exception as e:  # noqa: BLE001 - one bad item spoils no other
                if n:
                    entry.log.record(n, e)
                results[i] = error_answer(e)
        answers: list[object] = []
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
                results[i] = {"observation": out[0], "info": out[1]}
            else:
                results[i] = answer = step_answer(out, n)
                entry.log.record(n, answer)
                entry.steps += 1
        if cancelled is not None:
            raise cancelled

    def batch(self, items: list[dict[str, object]]) -> list[dict[str, object]]:
        """Steps (or resets) of several sessions, one round trip per sandbox; each item answered or errored.

        Each item is ``{"token", "op": "step" | "reset", "seq", "action", "seed"}``; a session may
        appear once. Items are numbered like single steps (replays answer the recorded step).
        """
        results, todo = self._prepare(items)
        return self._batch_prepared(todo, results)

    def _prepare(
        self, items: list[dict[str, object]]
    ) -> tuple[list[dict[str, object]], list[tuple[int, AgentSession, dict[str, object]]]]:
        """Authorise and check the items of a batch: ``(results, todo)``, refused items answered in
        ``results``, the others in ``todo`` in session order (locks are taken in one order: no two
        batches deadlock)."""
        results: list[dict[str, object]] = [{} for _ in items]
        todo: list[tuple[int, AgentSession, dict[str, object]]] = []
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
        todo.sort(key=lambda t: t[1].id)
        return results, todo

    def _batch_prepared(
        self, todo: list[tuple[int, AgentSession, dict[str, object]]], results: list[dict[str, object]]
    ) -> list[dict[str, object]]:
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

    def _run_locked(
        self, todo: list[tuple[int, AgentSession, dict[str, object]]], results: list[dict[str, object]]
    ) -> None:
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
                n = _step_number(entry, item, results, i)
                if n is None:
                    continue
                wire.append((entry.remote, "step", {"action": item["action"]}))
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


def _step_number(entry: AgentSession, item: dict[str, object], results: list[dict[str, object]], i: int) -> int | None:
    """The step number of batch item ``i`` (its action checked); None when that number was applied before
    (``results[i]`` is then its recorded answer)."""
    action = item.get("action")
    if not isinstance(action, str) or len(action) > MAX_ACTION_CHARS:
        raise WireError(422, "validation_error", "'action' must be a string")
    n, recorded = entry.log.check(item.get("seq"))
    if recorded is None:
        return n
    results[i] = error_answer(recorded) if isinstance(recorded, Exception) else recorded | {"replayed": True}
    return None


def _interrupted(entry: AgentSession) -> SandboxTimeout:
    return SandboxTimeout(
        f"the call on session {entry.id!r} was interrupted before its answer came; its outcome is unknown",
        sandbox_id=entry.remote.sandbox_id,
    )


def _check_action(action: object) -> None:
    if not isinstance(action, str) or len(action) > MAX_ACTION_CHARS:
        raise WireError(422, "validation_error", f"'action' must be a string of at most {MAX_ACTION_CHARS} characters")


def _check_reset(seed: object, options: object) -> None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32):
        raise WireError(422, "validation_error", "'seed' must be null or an int in [0, 2**32)")
    if options is not None and not isinstance(options, dict):
        raise WireError(422, "validation_error", "'options' must be null or an object")


def _one(remote: RemoteSession, op: str, args: dict[str, object]) -> object:
    try:
        return remote.step(args["action"]) if op == "step" else remote.reset(seed=args.get("seed"))
    except Exception as e:  # noqa: BLE001 - an answer like run_batch's
        return e
