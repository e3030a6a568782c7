"""Reconciliation when a manager starts: match persisted records with running sandboxes.

* a labelled container/process with a record of the same id and generation whose server answers
  is **adopted** (its sessions keep working); a handed-over process sandbox is held from then on, so
  it does not stop by itself (:mod:`rockroll.sandbox.handover`);
* one without a record, of a stale generation, a duplicate, or that does not answer is **removed**;
* a record whose sandbox is gone is **restarted** (``auto_restart``) or dropped.

So after any crash of the manager, no container or process of this manager's name is leaked.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from rockroll.sandbox.base import SandboxBackend, SandboxSpec
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.handover import hold
from rockroll.sandbox.managed import ManagedSandbox, SandboxState
from rockroll.sandbox.manager_config import ManagerConfig
from rockroll.sandbox.models import SandboxRecord
from rockroll.sandbox.store import SandboxStore

__all__ = ["reconcile", "ReconciledManager"]


class ReconciledManager(Protocol):
    """What reconciliation needs of a starting manager (:class:`~rockroll.sandbox.manager.SandboxManager` is one).

    It fills the manager's sandbox table (``_sandboxes``) and wakes its monitor (``_wake``).
    """

    config: ManagerConfig
    backend: SandboxBackend
    store: SandboxStore
    reconcile_report: dict[str, list[str]]
    _sandboxes: dict[str, ManagedSandbox]
    _wake: threading.Event

    def persist(self, sb: ManagedSandbox) -> None: ...


log = logging.getLogger(__name__)


def reconcile(m: ReconciledManager) -> dict[str, list[str]]:
    """Adopt, remove or restart; returns the ids in each group (for logs and tests)."""
    report: dict[str, list[str]] = {"adopted": [], "removed": [], "restarted": [], "dropped": []}
    records = {r.id: r for r in m.store.list()}
    kept: set[str] = set()
    for handle in m.backend.list_managed(m.config.name):
        rec = records.get(handle.sandbox_id)
        if rec is None or rec.backend != m.backend.name or rec.generation != handle.generation or rec.id in kept:
            m.backend.stop(handle)
            report["removed"].append(handle.sandbox_id or handle.ref)
            continue
        sb = _from_record(m, rec)
        handle.boot_id = rec.boot_id
        try:
            health = m.backend.health(handle, timeout_s=m.config.probe_timeout_s)
            if rec.boot_id and health.boot_id != rec.boot_id:
                raise SandboxError("boot id changed")
        except SandboxError:
            m.backend.stop(handle)
            report["removed"].append(rec.id)
            continue
        handle.boot_id = health.boot_id
        hold(m.backend, handle, m.config.probe_timeout_s)  # its countdown stops (process sandboxes)
        sb.handle, sb.state, sb.last_health, sb.sessions = handle, SandboxState.READY, health, health.sessions
        m._sandboxes[sb.id] = sb
        m.persist(sb)
        kept.add(rec.id)
        report["adopted"].append(rec.id)
    for rec in records.values():
        if rec.id in kept:
            continue
        if m.config.auto_restart and rec.backend == m.backend.name:
            sb = _from_record(m, rec)
            sb.state, sb.handle = SandboxState.UNHEALTHY, None  # the monitor's first probe replaces it
            m._sandboxes[sb.id] = sb
            report["restarted"].append(rec.id)
        else:
            m.store.delete(rec.id)
            report["dropped"].append(rec.id)
    if any(report.values()):
        log.info("reconciled sandboxes: %s", report)
    m.reconcile_report = report
    return report


def _from_record(m: ReconciledManager, rec: SandboxRecord) -> ManagedSandbox:
    sb = ManagedSandbox(rec.id, SandboxSpec.from_dict(rec.spec), m.backend, pool=rec.pool)
    sb.generation = rec.generation
    sb.restarts = rec.restarts
    sb.leased = rec.leased
    sb._dirty = m._wake
    return sb
