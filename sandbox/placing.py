"""Leases and session placement of a :class:`~rockroll.sandbox.manager.SandboxManager` (a mixin it inherits).

Split from :mod:`rockroll.sandbox.manager`, whose docstring tells the whole: ``acquire``/``release`` lease
a sandbox of a pool to one caller; ``open_session`` places an env session on the least-loaded healthy
sandbox of a spec (starting one when all are full) and returns its
:class:`~rockroll.sandbox.session.RemoteSession`.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import CapacityError, SandboxError, SandboxLost
from rockroll.sandbox.managed import ManagedSandbox, SandboxState
from rockroll.sandbox.manager_config import ManagerConfig
from rockroll.sandbox.pool import PoolConfig
from rockroll.sandbox.retry import POLL_MAX_DELAY_S, Backoff, retry_call
from rockroll.sandbox.session import RemoteSession

__all__ = ["Placing"]


class Placing:
    """Leases and session placement (see the module docstring); the attributes are the manager's."""

    config: ManagerConfig
    pools: dict[str, PoolConfig]
    _lock: threading.RLock
    _wake: threading.Event
    _workers: ThreadPoolExecutor

    if TYPE_CHECKING:  # SandboxManager's own

        def members(self, pool: str) -> builtins.list[ManagedSandbox]: ...

        def create(
            self, spec: SandboxSpec | None = None, *, pool: str = "", leased: bool = False
        ) -> ManagedSandbox: ...

        def delete(self, sandbox_id: str) -> None: ...

        def persist(self, sb: ManagedSandbox) -> None: ...

        def active_count(self) -> int: ...

    # ------------------------------------------------------------ pools
    def acquire(self, pool: str | None = None, timeout_s: float = 60.0) -> ManagedSandbox:
        """Lease an idle sandbox of ``pool`` (starting one if the pool may grow)."""
        name = pool or self.config.default_spec.name
        pc = self.pools.get(name)
        spec = pc.spec if pc else self.config.default_spec

        def lease() -> ManagedSandbox:
            with self._lock:
                for sb in self.members(name):
                    if sb.state == SandboxState.READY and not sb.leased and sb.sessions == 0:
                        sb.leased = True
                        sb.touch()
                        self._wake.set()
                        self._workers.submit(self.persist, sb)
                        return sb
            return self.create(spec, pool=name, leased=True)

        return retry_call(lease, retry_on=CapacityError, timeout_s=timeout_s, max_delay_s=POLL_MAX_DELAY_S)

    def release(self, sb: ManagedSandbox) -> None:
        """Give a leased sandbox back: it is deleted and the pool refills."""
        if not sb.deleted:
            self.delete(sb.id)
        self._wake.set()

    # --------------------------------------------------------- sessions
    def open_session(
        self, env_id: str, *, spec: SandboxSpec | None = None, avoid: Collection[str] = (), **kwargs: object
    ) -> RemoteSession:
        """An env session on the least-loaded healthy sandbox of ``spec`` (see module docstring), on none
        of the sandboxes in ``avoid`` (a hedged episode's copy stays off the sandbox that stalls)."""
        spec = spec or self.config.default_spec
        full = lost = 0
        last: SandboxError | None = None
        for _ in Backoff(timeout_s=spec.startup_timeout_s, max_delay_s=POLL_MAX_DELAY_S):
            with self._lock:
                candidates = [
                    sb
                    for sb in self.members(spec.name)
                    if sb.state == SandboxState.READY
                    and not sb.leased
                    and sb.sessions < sb.spec.max_sessions
                    and sb.id not in avoid
                ]
                best = min(candidates, key=lambda s: (s.load, s.last_used), default=None)
                if best is not None:
                    best.reserve()  # the slot is taken before leaving the manager lock
            if best is None:
                try:
                    best = self.create(spec, pool=spec.name)
                except CapacityError as e:
                    # at capacity, but a member still starting (another caller's, or a restart)
                    # will have free slots soon: wait for it rather than fail a burst of opens
                    if not self._coming_up(spec.name):
                        raise
                    last = e
                    continue
                best.reserve()
            try:
                return best.open_reserved(env_id, kwargs)
            except CapacityError as e:  # full since we looked: try another
                full, last = full + 1, e
                if full >= 3:
                    break
            except SandboxLost as e:  # died since its last probe (now marked unhealthy): try another
                lost, last = lost + 1, e
                if lost >= 3:
                    raise
        if full < 3 and last is not None:  # out of time: the last reason
            raise last
        raise CapacityError(self.active_count(), self.config.max_sandboxes, "sandboxes with a free session slot")

    def _coming_up(self, pool: str) -> bool:
        """Whether a member of ``pool`` is starting or being replaced (it will take sessions)."""
        return any(
            sb.state in (SandboxState.STARTING, SandboxState.RESTARTING) and not sb.leased for sb in self.members(pool)
        )
