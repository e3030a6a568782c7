"""Session slots: which sandbox of an owner's pool takes that owner's next env session.

:class:`SessionSlots` is the part of :class:`rockroll.api.nodes.placement.Placement` that picks a
sandbox and reserves one session slot on it: the least-loaded ready member of the owner's pool, else an
idle sandbox claimed from the warm pool (which the monitor then refills), else a new one started within
the owner's quota (:class:`rockroll.api.sandboxes.owners.OwnerLedger`). One sandbox is added to a pool
at a time, so a burst of opens waits for it instead of each starting one.

Threat model: as the placement's. Owners are untrusted and race each other: every pick and count
happens under :attr:`SessionSlots.lock`, and a sandbox is only handed to an owner once it is recorded
as theirs (a failed record deletes it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rockroll.api.sandboxes.owners import OwnerLedger
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import CapacityError
from rockroll.sandbox.managed import ManagedSandbox, SandboxState
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.retry import wait_until

__all__ = ["SessionSlots"]


class SessionSlots:
    """Reserve session slots on owners' pools (see the module docstring).

    ``warm_pool`` names the pool of unassigned warm sandboxes; ``delete`` stops a sandbox and forgets
    its owner record (the placement's own ``delete``).
    """

    def __init__(
        self, manager: SandboxManager, owners: OwnerLedger, *, warm_pool: str, delete: Callable[[str], None]
    ) -> None:
        self.manager = manager
        self.owners = owners
        self.warm_pool = warm_pool
        self._delete = delete
        self.lock = threading.Lock()  #: held for every pick and count of pool members
        self._grow_locks: dict[str, threading.Lock] = {}

    def reserve(self, owner: str, spec: SandboxSpec, pool: str) -> ManagedSandbox:
        """A sandbox of ``pool`` with one session slot reserved for the caller.

        One sandbox is added to a pool at a time (its lock): a burst of opens waits for it
        instead of each starting one.
        """
        sb = self._take_slot(pool)
        if sb is not None:
            return sb
        with self.lock:
            grow = self._grow_locks.setdefault(pool, threading.Lock())
        with grow:
            if self._coming_up(pool):  # a member being replaced takes sessions again soon
                wait_until(lambda: not self._coming_up(pool), spec.startup_timeout_s)
            sb = self._take_slot(pool)
            if sb is not None:
                return sb
            return self._add_member(owner, spec, pool)

    def idle_warm(self) -> list[ManagedSandbox]:
        """The warm pool's ready, unassigned members without sessions (call under :attr:`lock`)."""
        return [
            sb
            for sb in self.manager.members(self.warm_pool)
            if sb.state == SandboxState.READY and not sb.leased and sb.sessions == 0
        ]

    def used(self) -> int:
        """Sandboxes that count against ``max_sandboxes``: all but the idle warm ones (they make room)."""
        with self.lock:
            return self.manager.active_count() - len(self.idle_warm())

    def _take_slot(self, pool: str) -> ManagedSandbox | None:
        """Reserve a slot on the least-loaded ready member of ``pool`` with a free one (or None)."""
        with self.lock:
            members = [
                sb
                for sb in self.manager.members(pool)
                if sb.state == SandboxState.READY and not sb.leased and sb.sessions < sb.spec.max_sessions
            ]
            best = min(members, key=lambda sb: (sb.load, sb.last_used), default=None)
            if best is not None:
                self._reserve_slot(best)
            return best

    @staticmethod
    def _reserve_slot(sb: ManagedSandbox) -> None:
        sb.reserve()
        sb.touch()

    def _coming_up(self, pool: str) -> bool:
        return any(
            sb.state in (SandboxState.STARTING, SandboxState.RESTARTING) and not sb.leased
            for sb in self.manager.members(pool)
        )

    def _add_member(self, owner: str, spec: SandboxSpec, pool: str) -> ManagedSandbox:
        """Give ``owner`` one more sandbox in ``pool`` (a warm one, else a new one), slot reserved."""
        live = {sb.id for sb in self.manager.list()}
        with self.owners.reserve(owner, live, self.used()):
            sb = self._claim_warm(pool) if spec.name == self.warm_pool else None
            if sb is None:
                sb = self._create(spec, pool)
                with self.lock:
                    self._reserve_slot(sb)
            try:
                self.owners.assign(sb.id, owner)
            except BaseException:
                self._delete(sb.id)
                raise
            self.manager.persist(sb)
            return sb

    def _claim_warm(self, pool: str) -> ManagedSandbox | None:
        """Move an idle warm sandbox into ``pool`` with a slot reserved (the monitor refills the pool)."""
        with self.lock:
            idle = self.idle_warm()
            if not idle:
                return None
            sb = min(idle, key=lambda s: s.created_at)
            sb.pool = pool
            self._reserve_slot(sb)
            return sb

    def _create(self, spec: SandboxSpec, pool: str) -> ManagedSandbox:
        """Start a sandbox in ``pool``; at ``max_sandboxes``, stop an idle warm one to make room."""
        try:
            return self.manager.create(spec, pool=pool)
        except CapacityError:
            with self.lock:
                idle = self.idle_warm()
                victim = idle[0] if idle else None
                if victim is None:
                    raise
                victim.leased = True  # no session is placed on it any more
            self._delete(victim.id)
            return self.manager.create(spec, pool=pool)
