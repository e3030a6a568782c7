"""One running manager per name: a lease row in the manager's database.

Sandboxes are labelled with their manager's name, and a starting manager reconciles everything
with its name (adopting or removing it). Two managers of one name at once would remove each
other's sandboxes, so a manager holds a :class:`ManagerLease` row (``sandbox_manager_leases``) while it
runs, and a second one refuses to start (:class:`ManagerBusy`). The control plane's servers get
the same guard through the manager they own (its name derives from their database URL), so two
servers on one database refuse too.

The holder renews the lease every ``ttl_s / 3`` seconds and deletes it on close. A lease is free
when its row is missing, when its holder stopped renewing for ``ttl_s`` (a crash on another host),
or at once when its holder was a process on this host that no longer exists (SIGKILL): the new
manager then reaps or adopts the old one's sandboxes as usual.

Threat model: as :mod:`rockroll.sandbox.store` (trusted state).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from rockroll.sandbox.db import rowcount
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.models import ManagerLease

__all__ = ["Lease", "ManagerBusy", "LEASE_TTL_S", "live_leases", "tag_live"]

log = logging.getLogger(__name__)

#: seconds without renewal after which another host may take a lease over
LEASE_TTL_S = 15.0


class ManagerBusy(SandboxError):
    """Another running manager (or server) holds the name ``name``."""

    def __init__(self, name: str, host: str, pid: int, age_s: float, *, hint: str = "") -> None:
        if hint:
            message = f"cannot start a server of deployment {name!r}: {hint}"
        else:
            message = (
                f"a sandbox manager named {name!r} is already running (pid {pid} on {host}, "
                f"renewed {age_s:.0f}s ago); stop it, or give this one another name "
                "(SandboxManager(name=...), or another --db / --instance for a server)"
            )
        super().__init__(message)
        self.name, self.host, self.pid = name, host, pid


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed but not yet waited for, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def live_leases(
    engine: Engine, names: list[str] | None = None, *, prefix: str = "", ttl_s: float = LEASE_TTL_S
) -> dict[str, int]:
    """The leases held now (renewed within ``ttl_s``, by a live process when on this host): name -> pid.

    Only ``names`` when given, else those starting with ``prefix``. Control-plane replicas use it to
    tell whether the server that opened a session or runs a job still runs (:attr:`Lease.tag`).
    """
    return {r.name: r.pid for r in _live_rows(engine, names, prefix, ttl_s)}


def tag_live(engine: Engine, tags: list[str]) -> set[str]:
    """Which of the holdings ``tags`` (:attr:`Lease.tag`, ``name@holder``) still hold their lease."""
    names = sorted({t.rpartition("@")[0] for t in tags})
    held = {r.name: r.holder for r in _live_rows(engine, names, "", LEASE_TTL_S)} if names else {}
    return {t for t in tags if held.get(t.rpartition("@")[0]) == t.rpartition("@")[2]}


def _live_rows(engine: Engine, names: list[str] | None, prefix: str, ttl_s: float) -> list[ManagerLease]:
    """The lease rows held now (see :func:`live_leases`)."""
    now, host = time.time(), socket.gethostname()
    with Session(engine) as s:
        query = select(ManagerLease)
        if names is not None:
            query = query.where(ManagerLease.name.in_(names))
        elif prefix:
            query = query.where(ManagerLease.name.startswith(prefix, autoescape=True))
        rows = list(s.scalars(query))
    return [r for r in rows if now - r.heartbeat_at <= ttl_s and not (r.host == host and not _pid_alive(r.pid))]


class Lease:
    """The lease of manager ``name`` in the database of ``engine``: :meth:`acquire`, renewed in the background, :meth:`release`."""

    def __init__(self, engine: Engine, name: str, *, ttl_s: float = LEASE_TTL_S) -> None:
        self.engine, self.name, self.ttl_s = engine, name, ttl_s
        self.holder = secrets.token_hex(8)
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def tag(self) -> str:
        """``name@holder``: this holding of the lease (a restart of the same name is another one)."""
        return f"{self.name}@{self.holder}"

    def _stale(self, row: ManagerLease, now: float) -> bool:
        if row.host == self.host and row.pid != self.pid and not _pid_alive(row.pid):
            return True  # its process is gone (killed): no need to wait for the ttl
        return now - row.heartbeat_at > self.ttl_s

    def acquire(self) -> None:
        """Take the lease or raise :class:`ManagerBusy`; then renew it until :meth:`release`."""
        for _ in range(3):
            now = time.time()
            with Session(self.engine) as s, s.begin():
                row = s.get(ManagerLease, self.name)
                if row is None:
                    s.add(self._row(now))
                    try:
                        s.flush()
                    except IntegrityError:  # another manager inserted it first: look again
                        continue
                elif self._stale(row, now):
                    log.warning(
                        "taking over the lease of manager %r from pid %s on %s (not renewed for %.0fs)",
                        self.name,
                        row.pid,
                        row.host,
                        now - row.heartbeat_at,
                    )
                    taken = rowcount(
                        s.execute(
                            update(ManagerLease)
                            .where(ManagerLease.name == self.name, ManagerLease.holder == row.holder)
                            .values(holder=self.holder, host=self.host, pid=self.pid, acquired_at=now, heartbeat_at=now)
                        )
                    )
                    if not taken:
                        continue
                else:
                    raise ManagerBusy(self.name, row.host, row.pid, now - row.heartbeat_at)
            self._start_renewing()
            return
        raise SandboxError(f"could not take the lease of manager {self.name!r} (contention)")

    def _row(self, now: float) -> ManagerLease:
        return ManagerLease(
            name=self.name, holder=self.holder, host=self.host, pid=self.pid, acquired_at=now, heartbeat_at=now
        )

    def renew(self) -> bool:
        """Renew the lease now; False (and ``lost``) when someone else took it."""
        with Session(self.engine) as s, s.begin():
            n = rowcount(
                s.execute(
                    update(ManagerLease)
                    .where(ManagerLease.name == self.name, ManagerLease.holder == self.holder)
                    .values(heartbeat_at=time.time())
                )
            )
        if not n and not self.lost:
            log.error("manager %r lost its lease: another manager of this name took over", self.name)
        self.lost = not n
        return bool(n)

    def _start_renewing(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.ttl_s / 3):
                try:
                    self.renew()
                except SQLAlchemyError as e:  # a database hiccup: retry on the next beat
                    log.warning("cannot renew the lease of manager %r: %s", self.name, e)

        self._thread = threading.Thread(target=loop, name=f"lease-{self.name}", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop renewing and delete the lease (if still ours). Idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        try:
            with Session(self.engine) as s, s.begin():
                s.execute(
                    delete(ManagerLease).where(ManagerLease.name == self.name, ManagerLease.holder == self.holder)
                )
        except SQLAlchemyError as e:  # closing: the ttl frees it anyway
            log.warning("cannot release the lease of manager %r: %s", self.name, e)
