"""Opening and giving back an :class:`~rockroll.agentrl.rollout.env_manager.EnvManager`'s envs off the event loop
(:class:`EnvHandling`, a mixin of the manager).

Opens run in the manager's ``open_executor``, gives-back in its ``executor``; both survive the
episode's cancellation: an open abandoned (timeout, cancellation) that succeeds later in its thread
gives its env back exactly once, and :meth:`EnvHandling.drain` waits for every open and close.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from rockroll.agentrl.errors import boundary
from rockroll.sandbox.retry import await_until

if TYPE_CHECKING:
    from rockroll.agentrl.rollout.config import EpisodeConfig
    from rockroll.agentrl.sources.kinds import EnvSource
    from rockroll.envs.core import TextEnvProtocol

__all__ = ["EnvHandling"]


class _Opening(Protocol):
    """What :meth:`EnvHandling._open` reads of an episode (an :class:`~rockroll.agentrl.rollout.env_manager.EpisodeSpec`)."""

    env_id: str
    env_kwargs: dict[str, Any]
    group_id: str
    avoid: tuple[str, ...]


class _OpenTicket:
    """Hands an env whose open was abandoned (timeout, cancellation) back exactly once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.abandoned = False
        self.released = False

    def release_once(self, fut: cf.Future[Any], release: Callable[[Any], None]) -> None:
        if not self.released and not fut.cancelled() and fut.exception() is None:
            self.released = True
            release(fut.result())


class EnvHandling:
    """Env opens and gives-back of the manager (see the module docstring)."""

    source: EnvSource
    config: EpisodeConfig
    executor: cf.ThreadPoolExecutor
    open_executor: cf.ThreadPoolExecutor
    pending_closes: set[cf.Future[Any]]
    pending_opens: set[cf.Future[Any]]

    def _left(self, deadline: float, stage_timeout: float) -> float:
        """Seconds a stage may take: its own timeout, cut at the episode's ``deadline``."""
        return min(stage_timeout, deadline - time.monotonic())

    def _release(self, env: TextEnvProtocol, reusable: bool = False) -> None:
        """Give ``env`` back in the background (never blocks the event loop, survives
        cancellation); ``reusable``: the attempt ended cleanly (see :meth:`EnvSource.give_back`)."""
        try:
            fut = self.executor.submit(self.source.give_back, env, reusable=reusable)
        except RuntimeError:  # the pool is shut down: give it back right here
            self.source.give_back(env, reusable=reusable)
            return
        self.pending_closes.add(fut)
        fut.add_done_callback(self.pending_closes.discard)

    async def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until every env given back is closed; False when some did not close in time."""
        return await await_until(lambda: not (self.pending_opens or self.pending_closes), timeout_s)

    async def _open(self, ep: _Opening, deadline: float) -> TextEnvProtocol:
        """Open ``ep``'s env: a kept one at once, else in :attr:`open_executor` within the start timeout; an open
        abandoned (timeout, cancellation) that succeeds later gives its env back."""
        # a hedged copy goes away from the stalled one's place (avoid); a group's envs spread over places
        kept = self.source.open_now(ep.env_id, ep.env_kwargs, avoid=ep.avoid, group=ep.group_id)
        if kept is not None:  # a kept env, taken without I/O: no worker thread
            return kept
        fut = self.open_executor.submit(self.source.open, ep.env_id, ep.env_kwargs, avoid=ep.avoid, group=ep.group_id)
        self.pending_opens.add(fut)
        ticket = _OpenTicket()

        def opened(f: cf.Future[Any]) -> None:
            with ticket.lock:
                if ticket.abandoned:
                    ticket.release_once(f, self._release)
            self.pending_opens.discard(f)

        fut.add_done_callback(opened)
        try:
            timeout = self._left(deadline, self.config.start_timeout_s)
            return await boundary("sandbox_start", asyncio.wrap_future(fut), timeout)
        except BaseException:
            # the open may still succeed later in its thread: that env is given back when it does
            with ticket.lock:
                ticket.abandoned = True
                if fut.done():
                    ticket.release_once(fut, self._release)
            raise
