"""Lifetimes of user sandboxes (issue 13 item 5): nobody holds a sandbox forever.

A caller may give ``ttl_s`` when creating a sandbox (``POST /v1/sandboxes``); left out, it is the
server's ``sandbox_ttl_s``, and over ``max_sandbox_ttl_s`` it answers 422 ``over_cap``
(:func:`rockroll.api.server.caps.capped_sandbox`). The sandbox's owner record keeps ``expires_at`` (shown in
the sandbox's view), so a restarted server keeps the lifetimes of the sandboxes it adopts.

From ``expires_at`` on, every call naming the sandbox answers 404 ``sandbox_expired`` (404 like any
sandbox that is gone, with its own code and the time it expired), and :class:`ExpiryReaper` stops it
within about a second. The record stays for :data:`EXPIRED_KEPT_S` so that its owner learns why the
sandbox is gone; then it is dropped (the table does not grow with every sandbox ever made).

Threat model: owners are untrusted and would keep sandboxes, and the quota they hold, as long as they
could; lifetimes are the server's, checked on every call rather than trusted to the reaper alone.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from sqlalchemy import select

from rockroll.api.db import Database, SandboxOwner
from rockroll.api.server.errors import ApiError
from rockroll.sandbox.errors import SandboxError, SandboxNotFound

__all__ = ["ExpiryReaper", "EXPIRED_KEPT_S", "check_not_expired"]

log = logging.getLogger("rockroll.api")

#: how long the record of an expired sandbox is kept (its calls answer ``sandbox_expired`` meanwhile)
EXPIRED_KEPT_S = 3600.0


def check_not_expired(sandbox_id: str, expires_at: float | None, now: float | None = None) -> None:
    """404 ``sandbox_expired`` when ``expires_at`` has passed."""
    if expires_at is None:
        return
    now = time.time() if now is None else now
    if expires_at <= now:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at))
        raise ApiError(
            404, "sandbox_expired", f"sandbox {sandbox_id!r} expired at {when} (its ttl_s) and was stopped",
            {"expires_at": expires_at},
        )  # fmt: skip


class ExpiryReaper:
    """Stops user sandboxes whose lifetime is over (every ``interval_s``), keeping their records a while."""

    def __init__(self, db: Database, placement: Any, *, interval_s: float = 1.0) -> None:
        self.db, self.placement, self.interval_s = db, placement, interval_s
        self.expired = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def reap(self, now: float | None = None) -> list[str]:
        """Stop every live sandbox past its ``expires_at``; drop records expired over :data:`EXPIRED_KEPT_S`
        ago. Returns the ids stopped."""
        now = time.time() if now is None else now
        live = {sb.id for sb in self.placement.list()}
        with self.db.session() as s:
            rows = list(s.scalars(select(SandboxOwner).where(SandboxOwner.expires_at <= now)))
            due = [r.sandbox_id for r in rows if r.sandbox_id in live]
            for r in rows:
                if r.sandbox_id not in live and r.expires_at is not None and r.expires_at <= now - EXPIRED_KEPT_S:
                    s.delete(r)
        for sid in due:
            log.info("stopping sandbox %s: its lifetime (ttl_s) is over", sid)
            try:
                self.placement.stop(sid)
            except SandboxNotFound:
                continue
            except SandboxError as e:
                log.warning("cannot stop expired sandbox %s: %s", sid, e)
                continue
            self.expired += 1
        return due

    def start(self) -> None:
        """Run :meth:`reap` every ``interval_s`` on a thread until :meth:`close`."""

        def loop() -> None:
            while not self._stop.wait(self.interval_s):
                try:
                    self.reap()
                except Exception:  # noqa: BLE001 - the reaper must survive anything
                    log.exception("sandbox expiry reaper failed")

        self._thread = threading.Thread(target=loop, name="sandbox-expiry", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
