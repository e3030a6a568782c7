"""Per-owner quotas on sandbox calls (exec and files) and the threads that run them.

An exec or file call waits on its sandbox for as long as the command or the file takes. Run on
the request loop it would stop every other request; run on the thread pool the sync routes share
(40 threads) a few dozen ``sleep 20`` execs would leave ``/v1/health``, sessions and every other
route waiting for a thread. So each admitted call runs on a thread of its own, and admission is
bounded: at most ``per_owner`` calls of one owner and ``total`` over all owners run at once. One
more is refused at once with 429 ``capacity`` naming the limit; nothing queues. A slot is given
back when its call's thread ends, not when the request goes away, so a client that hangs up
cannot have more work running than its quota.

Threat model: an owner (token) floods the server with long execs or file calls that never end
(FIFOs, huge files); other owners' requests must still be answered at once, and the number of
threads stays bounded whatever the flood.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request

from rockroll.api.server.errors import capacity_error

__all__ = ["CallLimits", "get_call_limits", "CallsDep"]

T = TypeVar("T")


class CallLimits:
    """Counts running sandbox calls per owner and in all; runs each admitted call on its own thread."""

    def __init__(self, per_owner: int, total: int) -> None:
        if per_owner < 1 or total < 1:
            raise ValueError(f"limits must be at least 1, got per_owner={per_owner}, total={total}")
        self.per_owner = per_owner
        self.total = total
        self._running: dict[str, int] = {}
        self._all = 0
        self._lock = threading.Lock()

    def running(self, owner: str | None = None) -> int:
        """Calls running now: of ``owner``, or of everyone."""
        with self._lock:
            return self._all if owner is None else self._running.get(owner, 0)

    def acquire(self, owner: str) -> None:
        """Take a slot for ``owner`` or raise a 429 naming the limit that is reached."""
        with self._lock:
            mine = self._running.get(owner, 0)
            if mine >= self.per_owner:
                raise capacity_error(
                    f"{owner} has {mine} exec/file calls running, the limit (max_sandbox_calls_per_owner="
                    f"{self.per_owner}); wait for one to finish",
                    mine, self.per_owner, "sandbox calls per owner",
                )  # fmt: skip
            if self._all >= self.total:
                raise capacity_error(
                    f"the server runs {self._all} exec/file calls, the limit (max_sandbox_calls={self.total}); "
                    "try again shortly",
                    self._all, self.total, "sandbox calls",
                )  # fmt: skip
            self._running[owner] = mine + 1
            self._all += 1

    def release(self, owner: str) -> None:
        """Give back a slot taken by :meth:`acquire`."""
        with self._lock:
            left = self._running.get(owner, 0) - 1
            if left > 0:
                self._running[owner] = left
            else:
                self._running.pop(owner, None)
            self._all = max(0, self._all - 1)

    async def run(self, owner: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a thread of its own once admitted (429 at once when not); awaits its result."""
        self.acquire(owner)
        return await self.run_admitted(owner, fn, *args)

    async def run_admitted(self, owner: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a thread of its own, in the slot ``owner`` took with :meth:`acquire` (given back at its end)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()

        def work() -> None:
            try:
                outcome: tuple[bool, Any] = (True, fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting request
                outcome = (False, e)
            finally:
                self.release(owner)  # before the answer goes out: the caller's next call finds its slot free
            try:
                loop.call_soon_threadsafe(_settle, done, outcome)
            except RuntimeError:  # the loop is closed (server shutting down): nobody waits any more
                pass

        try:
            threading.Thread(target=work, name=f"rr-call-{owner}", daemon=True).start()
        except BaseException:
            self.release(owner)
            raise
        return await done


def _settle(done: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if done.done():  # the request was cancelled (client gone)
        return
    ok, value = outcome
    if ok:
        done.set_result(value)
    else:
        done.set_exception(value)


async def get_call_limits(request: Request) -> CallLimits:
    """The app's :class:`CallLimits`, made from its settings on first use."""
    limits = getattr(request.app.state, "call_limits", None)
    if limits is None:
        settings = request.app.state.rr.settings
        limits = CallLimits(settings.max_sandbox_calls_per_owner, settings.max_sandbox_calls)
        request.app.state.call_limits = limits
    return limits


#: handler parameter type: ``calls: CallsDep``
CallsDep = Annotated[CallLimits, Depends(get_call_limits)]
