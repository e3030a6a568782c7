"""The batch step route's work: many sessions' steps and resets in one call, grouped by sandbox.

:func:`run_items` runs ``(session_id, op, action, seed)`` items for
:meth:`rockroll.api.sessions.live.SessionRegistry.batch`; the error mapping of one call (a lost sandbox or node
agent as 410) is shared with the single-call routes (:func:`lost_guard`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Literal, Protocol

from rockroll.api.db import SessionRecord
from rockroll.api.server.auth import Principal
from rockroll.api.server.errors import ApiError, to_api_error
from rockroll.api.server.metrics import Metrics
from rockroll.api.sessions.records import LiveSession
from rockroll.envs.tools import Action, ToolAction
from rockroll.sandbox.errors import SandboxLost
from rockroll.sandbox.node.remote import NodeSession
from rockroll.sandbox.node.wire import reset_answer, step_answer
from rockroll.sandbox.session import EnvSession, RemoteSession, run_batch


class Registry(Protocol):
    """What :func:`run_items` needs of its :class:`~rockroll.api.sessions.live.SessionRegistry`."""

    @property
    def _live(self) -> dict[str, LiveSession]: ...

    @property
    def _pool(self) -> ThreadPoolExecutor: ...

    @property
    def metrics(self) -> Metrics: ...

    def get(self, session_id: str, who: Principal, *, lost_ok: bool = False) -> LiveSession: ...


#: a batch item: (session id, op: step | reset, action (the agent's text or a turn with tool calls), seed)
Item = tuple[str, Literal["step", "reset"], Action, int | None]
#: a batch item's answer: the step's or reset's fields, or ``{"error": {...}, "status": N}``
Result = dict[str, object]

__all__ = ["run_items", "lost_guard", "lost_reason", "node_lost", "server_gone"]


def run_items(reg: Registry, who: Principal, items: list[Item]) -> list[Result]:
    """Run ``(session_id, op, action, seed)`` items; ``op`` is ``step`` or ``reset``.

    Items are grouped by sandbox; each group runs in order on one worker, groups run in
    parallel (so sessions spread over several sandboxes use several cores). Each result is
    the step/reset answer or ``{"error": {...}, "status": N}``.
    """
    results: list[Result] = [{} for _ in items]
    groups: dict[str, list[int]] = {}
    for i, (sid, _op, _action, _seed) in enumerate(items):
        try:
            live = reg.get(sid, who)
        except ApiError as e:
            results[i] = _error_item(e)
            continue
        groups.setdefault(live.sandbox_id, []).append(i)

    def run(indices: list[int]) -> None:
        """One sandbox's items in one round trip (see ``sandbox.session.run_batch``)."""
        lives = [reg._live.get(items[i][0]) for i in indices]
        todo = [(i, live) for i, live in zip(indices, lives, strict=False) if live is not None]
        for i, live in zip(indices, lives, strict=False):
            if live is None:  # closed since the lookup above
                results[i] = _error_item(ApiError(404, "not_found", f"no session {items[i][0]}", {}))
        wire: list[tuple[EnvSession, str, dict[str, object]]] = [
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
                results[i] = dict(reset_answer(answer))
            else:
                live.steps += 1
                reg.metrics.observe_step(per_item)
                played = step_answer(answer, 0)
                del played["seq"]
                results[i] = dict(played)

    chunks = list(groups.values())
    if len(chunks) <= 1:
        for chunk in chunks:
            run(chunk)
    else:
        for f in [reg._pool.submit(run, chunk) for chunk in chunks]:
            f.result()
    return results


def _numbered_batch(
    todo: list[tuple[int, LiveSession]], items: list[Item], wire: list[tuple[EnvSession, str, dict[str, object]]]
) -> list[object]:
    """``run_batch(wire)`` holding the step logs of the embedded agent's sessions, their steps recorded.

    Sessions on other node agents (not ``RemoteSession``) are played one call each.
    """
    sandboxed = [(remote, op, args) for remote, op, args in wire if isinstance(remote, RemoteSession)]
    if len(sandboxed) < len(wire):
        return [_one(remote, op, args) for remote, op, args in wire]
    logs = sorted({id(live.entry.log): live.entry.log for _i, live in todo if live.entry is not None}.values(),
                  key=lambda log: log.session_id)  # fmt: skip
    for log in logs:
        log.lock.acquire()
    try:
        answers = run_batch(sandboxed)
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


def _one(remote: EnvSession, op: str, args: dict[str, object]) -> object:
    try:
        if op == "step":
            action = args["action"]
            return remote.step(action if isinstance(action, (str, ToolAction)) else str(action))
        seed = args.get("seed")
        return remote.reset(seed=seed if isinstance(seed, int) else None)
    except Exception as e:  # noqa: BLE001 - an answer, like run_batch's
        return e


def _error_item(e: ApiError) -> Result:
    return {"error": {"code": e.code, "message": e.message, "details": e.details}, "status": e.status}


def _batch_error(live: LiveSession, e: Exception) -> ApiError:
    """The API error for one failed batch item (the same mapping as a single call's)."""
    try:
        with lost_guard(live):
            raise e
    except ApiError as mapped:
        return mapped
    except Exception as other:  # noqa: BLE001 - mapped below, never a 500 for one item
        found = to_api_error(other)
        if found is None:
            return ApiError(502, "sandbox_error", f"{type(other).__name__}: {other}", {"session_id": live.id})
        return found


@contextmanager
def lost_guard(live: LiveSession) -> Iterator[None]:
    """Turn a lost sandbox into ``410 sandbox_lost`` with the session's sandbox id."""
    try:
        yield
    except SandboxLost as e:
        if lost_reason(live):
            raise node_lost(live) from e
        details = {"sandbox_id": live.sandbox_id, "session_id": live.id}
        raise ApiError(410, "sandbox_lost", str(e), details) from e


def lost_reason(live: LiveSession) -> str:
    """Why the node agent serving ``live`` was declared lost ('' while it serves, and for other sessions)."""
    return live.remote.lost_reason if isinstance(live.remote, NodeSession) else ""


def node_lost(live: LiveSession) -> ApiError:
    """``410 session_lost``: the node agent serving ``live`` died (its reason in the message)."""
    details = {"session_id": live.id, "node": live.node, "sandbox_id": live.sandbox_id, "reason": "node_lost"}
    return ApiError(410, "session_lost", f"{lost_reason(live)}; open a new session", details)


def server_gone(rec: SessionRecord, opener_live: bool) -> ApiError:
    """The answer for a session that ran on a server's own sandboxes (a row ``rec`` of ``api_sessions``).

    ``410 sandbox_lost`` once that server is gone (its env state went with it); ``409 session_elsewhere``
    while that server, another replica, still serves it (a custom env's session stays on the replica that
    opened it: its calls go there).
    """
    if opener_live and rec.server:
        return ApiError(
            409,
            "session_elsewhere",
            f"session {rec.id} runs on the sandboxes of another control-plane replica "
            f"({rec.server.rpartition('@')[0]}); send its calls to that replica",
            {"session_id": rec.id, "server": rec.server},
        )
    return ApiError(
        410,
        "sandbox_lost",
        "the server that held this session restarted, and its env state went with it; open a new session",
        {"sandbox_id": rec.sandbox_id, "session_id": rec.id, "reason": "server_restart"},
    )
