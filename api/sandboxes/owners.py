"""Which token owner each sandbox serves, and the per-owner quota (issue 13, items 2 and 7).

Every sandbox the API starts serves one owner: a user sandbox its creator, a session sandbox the
owner of every session placed on it. The owner is recorded in ``api_sandboxes``
(:class:`~rockroll.api.db.SandboxOwner`) and, for session sandboxes, also named by the sandbox's
pool: ``<pool>@<owner tag>`` (``sessions@3f2a...`` or ``env-<fingerprint>@3f2a...``), so the
manager's warm-pool bookkeeping (``min_idle`` unassigned members) never counts a sandbox that
already serves someone. The warm pool's unassigned sandboxes (pool ``sessions``) belong to nobody
until their first session.

Quota: every live sandbox of an owner, user or session, counts against
``max_sandboxes_per_owner``; and an owner who already holds a sandbox cannot take the last free
slot of ``max_sandboxes`` (it is kept for an owner who holds none), so no single owner can take
the whole server. Both refusals are ``429 capacity`` naming the limit.

Threat model: owners are untrusted and may race each other; the counts are taken under one lock
with the sandboxes still being started (``pending``) included.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from sqlalchemy import delete, select

from rockroll.api.db import Database, SandboxOwner
from rockroll.api.server.errors import capacity_error

__all__ = ["OwnerLedger", "base_pool", "owner_pool"]

TAG_SEP = "@"


def owner_pool(base: str, owner: str) -> str:
    """The pool of ``owner``'s sandboxes of spec pool ``base`` (fits the 64-character pool column)."""
    return f"{base}{TAG_SEP}{hashlib.sha256(owner.encode()).hexdigest()[:12]}"


def base_pool(pool: str) -> str:
    """The spec pool a sandbox's pool name comes from (``sessions@3f2a...`` -> ``sessions``)."""
    return pool.split(TAG_SEP, 1)[0]


class OwnerLedger:
    """Sandbox -> owner records in the database; per-owner counts and reservations."""

    def __init__(self, db: Database, *, per_owner: int, total: int) -> None:
        self.db = db
        self.per_owner = per_owner
        self.total = total
        self._pending: dict[str, int] = {}  # owner -> sandboxes being started or claimed for them
        self._lock = threading.Lock()

    # ------------------------------------------------------------ records
    def load(self, sandbox_ids: Iterable[str]) -> dict[str, str]:
        """The recorded owners of ``sandbox_ids`` (on start: the adopted sandboxes keep their owner)."""
        ids = set(sandbox_ids)
        if not ids:
            return {}
        with self.db.session() as s:
            rows = s.scalars(select(SandboxOwner).where(SandboxOwner.sandbox_id.in_(ids)))
            return {r.sandbox_id: r.owner for r in rows}

    def assign(self, sandbox_id: str, owner: str) -> None:
        """Record that ``sandbox_id`` serves ``owner`` from now on."""
        with self.db.session() as s:
            s.merge(SandboxOwner(sandbox_id=sandbox_id, owner=owner))

    def forget(self, sandbox_ids: Iterable[str]) -> None:
        """Drop the records of deleted sandboxes."""
        ids = list(sandbox_ids)
        if not ids:
            return
        with self.db.session() as s:
            s.execute(delete(SandboxOwner).where(SandboxOwner.sandbox_id.in_(ids)))

    def held(self, owner: str, live_ids: set[str]) -> int:
        """How many live sandboxes (user and session) ``owner`` holds."""
        with self.db.session() as s:
            ids = set(s.scalars(select(SandboxOwner.sandbox_id).where(SandboxOwner.owner == owner)))
        return len(ids & live_ids)

    # ------------------------------------------------------------- quota
    @contextmanager
    def reserve(self, owner: str, live_ids: set[str], used: int) -> Iterator[None]:
        """Hold one more sandbox for ``owner`` while it is started or claimed (429 when over a limit).

        ``used`` is how many of ``max_sandboxes`` are taken by sandboxes that cannot be given
        back on demand (the warm pool's idle ones can: they are stopped to make room).
        """
        with self._lock:
            mine = self.held(owner, live_ids) + self._pending.get(owner, 0)
            taken = used + sum(self._pending.values())
            if mine >= self.per_owner:
                raise capacity_error(
                    f"{owner} holds {mine} sandboxes (sessions' and their own), the limit max_sandboxes_per_owner="
                    f"{self.per_owner}; close sessions or delete a sandbox first",
                    mine, self.per_owner, "sandboxes per owner",
                )  # fmt: skip
            if taken >= self.total or (mine > 0 and taken >= self.total - 1):
                reason = "the server is full" if taken >= self.total else "the last free one is kept for other owners"
                raise capacity_error(
                    f"{taken} of max_sandboxes={self.total} sandboxes are in use and {reason}; "
                    "close sessions or delete a sandbox, or retry later",
                    taken, self.total, "sandboxes",
                )  # fmt: skip
            self._pending[owner] = self._pending.get(owner, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._pending.get(owner, 1) - 1
                if left:
                    self._pending[owner] = left
                else:
                    self._pending.pop(owner, None)
