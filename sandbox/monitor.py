"""The health monitor: periodic probes, auto-restart, idle reaping and pool top-up.

Every ``monitor_interval_s`` (or at once when a caller reports an unreachable sandbox), each ready
or unhealthy sandbox gets a ``health`` probe. A probe that fails on a dead container/process
replaces the sandbox at once; a live sandbox that stays silent for ``failure_threshold`` probes in
a row is marked unhealthy, then replaced. A server with a different boot id than recorded (it
restarted behind the manager's back) is replaced too, since its sessions are gone. With
``replace_stray``, a shared (not leased) sandbox that holds sessions while this manager holds none there, for ``STRAY_PROBES`` probes
in a row, is replaced: nobody can close them (a dead server's opens that ended after it died, a close
that never reached the sandbox), and they would hold its slots forever.

Threat model: a sandbox can hang, lie about its load or die at any time; the monitor never blocks
on one for longer than ``probe_timeout_s``.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from concurrent.futures import Executor
from typing import Protocol

from rockroll.sandbox.base import SandboxBackend, SandboxSpec
from rockroll.sandbox.errors import CapacityError, SandboxError
from rockroll.sandbox.managed import ManagedSandbox, SandboxState
from rockroll.sandbox.manager_config import ManagerConfig
from rockroll.sandbox.pool import PoolConfig

__all__ = ["HealthMonitor", "MonitoredManager"]

#: probes in a row that must find sessions in a shared sandbox where this manager holds none before it is replaced
STRAY_PROBES = 3


class MonitoredManager(Protocol):
    """What the monitor needs of its manager (:class:`~rockroll.sandbox.manager.SandboxManager` is one).

    The underscored members are the manager's own machinery the monitor drives: the wake-up event,
    reserving a pool slot, the worker pool that boots sandboxes, and forgetting one that failed.
    """

    config: ManagerConfig
    backend: SandboxBackend
    pools: dict[str, PoolConfig]
    _wake: threading.Event

    @property
    def _workers(self) -> Executor: ...

    def list(self) -> list[ManagedSandbox]: ...

    def members(self, pool: str) -> builtins.list[ManagedSandbox]: ...

    def boot(self, sb: ManagedSandbox) -> ManagedSandbox: ...

    def delete(self, sandbox_id: str) -> None: ...

    def schedule_restart(self, sb: ManagedSandbox, reason: str, generation: int | None = None) -> None: ...

    def _reserve(self, spec: SandboxSpec, pool: str, *, leased: bool = False) -> ManagedSandbox: ...

    def _forget(self, sb: ManagedSandbox) -> None: ...


log = logging.getLogger(__name__)


class HealthMonitor:
    """Runs :meth:`tick` in a daemon thread until :meth:`stop`."""

    def __init__(self, manager: MonitoredManager) -> None:
        self.manager = manager
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ticks = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sandbox-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.manager._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        interval = self.manager.config.monitor_interval_s or 1.0
        while not self._stop.is_set():
            self.manager._wake.wait(interval)
            self.manager._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the monitor must survive anything
                log.exception("health monitor tick failed")

    def tick(self) -> None:
        """One round: probe every sandbox, reap idle ones, top pools up."""
        self.ticks += 1
        for sb in self.manager.list():
            self.probe(sb)
        self.reap_idle()
        self.top_up()

    def probe(self, sb: ManagedSandbox) -> bool:
        m = self.manager
        if sb.state == SandboxState.UNHEALTHY and sb.handle is None:
            m.schedule_restart(sb, "a previous replacement failed")
            return False
        if sb.state not in (SandboxState.READY, SandboxState.UNHEALTHY) or sb.handle is None:
            return True
        handle, gen = sb.handle, sb.generation
        try:
            health = m.backend.health(handle, timeout_s=m.config.probe_timeout_s)
        except SandboxError as e:
            if sb.generation != gen or sb.deleted:
                return True  # replaced or deleted while we probed
            if not m.backend.is_alive(handle):
                reason = m.backend.exit_reason(handle) or "died"
                log.warning("sandbox %s is dead (%s)", sb.id, reason)
                if m.config.auto_restart:
                    m.schedule_restart(sb, f"dead: {reason}", gen)
                return False
            sb.failures += 1
            sb.state = SandboxState.UNHEALTHY
            log.warning("sandbox %s failed probe %d: %s", sb.id, sb.failures, e)
            if sb.failures >= m.config.failure_threshold and m.config.auto_restart:
                m.schedule_restart(sb, f"unhealthy after {sb.failures} failed probes", gen)
            return False
        if sb.generation != gen or sb.deleted:
            return True  # replaced or deleted while we probed: the answer is about the old server
        if handle.boot_id and health.boot_id != handle.boot_id:
            if m.config.auto_restart:
                m.schedule_restart(sb, "server restarted behind the manager", gen)
            return False
        with sb.lock:
            if sb.generation != gen:  # replaced just now: its session count starts again at 0
                return True
            sb.last_health = health
            sb.failures = 0
            if sb.state == SandboxState.UNHEALTHY:
                sb.state = SandboxState.READY
            sb.sessions = max(sb.opened, health.sessions)
            stray = not sb.leased and sb.opened == 0 and health.sessions > 0
            sb.stray_probes = sb.stray_probes + 1 if stray else 0
            replace = sb.stray_probes >= STRAY_PROBES and m.config.auto_restart and m.config.replace_stray
        if replace:  # sessions nobody holds (a dead server's, or a close that never reached the sandbox)
            m.schedule_restart(sb, f"{health.sessions} sessions that no one holds", gen)
        return True

    def reap_idle(self) -> None:
        m = self.manager
        ttl = m.config.idle_ttl_s
        if ttl is None:
            return
        now = time.monotonic()
        for sb in m.list():
            if sb.state != SandboxState.READY or sb.leased or sb.sessions or now - sb.last_used < ttl:
                continue
            pc = m.pools.get(sb.pool)
            if pc is not None and len(self._idle(sb.pool)) <= pc.min_idle:
                continue
            log.info("reaping idle sandbox %s", sb.id)
            try:
                m.delete(sb.id)
            except SandboxError:
                pass

    def _idle(self, pool: str) -> list[ManagedSandbox]:
        return [
            sb
            for sb in self.manager.members(pool)
            if sb.state in (SandboxState.READY, SandboxState.STARTING) and not sb.leased and sb.sessions == 0
        ]

    def top_up(self) -> None:
        m = self.manager
        for name, pc in m.pools.items():
            missing = pc.min_idle - len(self._idle(name))
            for _ in range(max(0, missing)):
                try:
                    sb = m._reserve(pc.spec, name)
                except CapacityError:
                    break
                except SandboxError:
                    return
                m._workers.submit(self._boot_member, sb)

    def _boot_member(self, sb: ManagedSandbox) -> None:
        try:
            self.manager.boot(sb)
        except SandboxError as e:
            log.warning("pool sandbox %s failed to start: %s", sb.id, e)
            self.manager._forget(sb)
