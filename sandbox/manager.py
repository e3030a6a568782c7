"""``SandboxManager``: create, pool, monitor, restart, reap and persist sandboxes.

* create/get/list/delete/restart sandboxes, within ``max_sandboxes`` (else :class:`CapacityError`);
* a warm pool of started sandboxes that ``create`` hands out (``warm_pool``, :mod:`rockroll.sandbox.warm`),
  and named pools (:mod:`rockroll.sandbox.pool`), ``acquire``/``release``;
* ``open_session(env_id, **kwargs)`` places an env session on the least-loaded healthy sandbox
  of the spec (starting one when all are full) and returns a :class:`~rockroll.sandbox.session.RemoteSession`;
* settings in :class:`ManagerConfig` (:mod:`rockroll.sandbox.manager_config`, re-exported here);
* a health monitor (:mod:`rockroll.sandbox.monitor`) replaces dead or unhealthy sandboxes under the same
  id (sessions of the old incarnation raise :class:`SandboxLost`), reaps idle ones after
  ``idle_ttl_s`` and tops pools up;
* records persist through SQLAlchemy (:mod:`rockroll.sandbox.store`), by default in the user data
  directory (``platformdirs``), whatever the current directory; a new manager with the same ``name``
  reconciles on start: labelled containers/processes with a matching record are adopted, others
  removed, and records whose sandbox is gone are restarted, so nothing leaks (after a SIGKILL too);
* one manager per name at a time: a second one raises :class:`~rockroll.sandbox.lease.ManagerBusy`
  (:mod:`rockroll.sandbox.lease`) instead of removing the first one's sandboxes;
* every replacement is logged with its reason in ``restart_log`` (newest last);
* exits stop its sandboxes: ``close()``, ``with``, and, for a manager still open when the
  interpreter exits (Ctrl-C, ``sys.exit``, SIGTERM), an exit hook (:mod:`rockroll.sandbox.shutdown`).

Threat model: the manager is trusted and runs on the host; see each backend for isolation.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypedDict

from sqlalchemy.exc import SQLAlchemyError

from rockroll.sandbox.backends import BackendConfig
from rockroll.sandbox.backends import make_backend as build_backend
from rockroll.sandbox.base import SandboxBackend, SandboxSpec
from rockroll.sandbox.errors import CapacityError, SandboxError, SandboxNotFound
from rockroll.sandbox.lease import Lease
from rockroll.sandbox.managed import ManagedSandbox, SandboxState
from rockroll.sandbox.manager_config import ManagerConfig
from rockroll.sandbox.monitor import HealthMonitor
from rockroll.sandbox.placing import Placing
from rockroll.sandbox.reconcile import reconcile
from rockroll.sandbox.retry import wait_until
from rockroll.sandbox.shutdown import track
from rockroll.sandbox.store import SandboxStore
from rockroll.sandbox.warm import WarmPool, WarmSandbox

__all__ = ["SandboxManager", "ManagerConfig", "RestartEvent", "make_backend"]

log = logging.getLogger(__name__)


class RestartEvent(TypedDict):
    """One replacement of a sandbox under its id (``restart_log``)."""

    time: float
    sandbox_id: str
    pool: str
    generation: int  # the generation it was replaced from
    reason: str


def make_backend(config: ManagerConfig) -> SandboxBackend:
    """The backend ``config.backend`` names, built through the registry (:mod:`rockroll.sandbox.backends`)
    with the manager's ``state_dir``, ``docker_hosts`` and default image."""
    return build_backend(
        config.backend,
        state_dir=config.state_dir,
        docker_hosts=config.docker_hosts,
        image=config.default_spec.image,
    )


class SandboxManager(Placing):
    """See the module docstring (leases and session placement: :class:`~rockroll.sandbox.placing.Placing`).

    ``SandboxManager(name="x", backend="process")`` overrides config fields; ``backend`` may also be a
    :class:`~rockroll.sandbox.backends.BackendConfig` or a :class:`SandboxBackend` instance.
    """

    def __init__(
        self,
        config: ManagerConfig | None = None,
        *,
        backend: SandboxBackend | BackendConfig | str | None = None,
        **overrides: Any,
    ) -> None:
        if isinstance(backend, (str, BackendConfig)):
            overrides["backend"], backend = backend, None
        self.config = ManagerConfig(**{**(dict(config) if config else {}), **overrides})  # validated again
        self.backend = backend or make_backend(self.config)
        self.reconcile_report: dict[str, list[str]] = {}
        self.store = SandboxStore(self.config.db_url, self.config.name)
        self.lease = Lease(self.store.engine, self.config.name)
        #: replacements, newest last
        self.restart_log: deque[RestartEvent] = deque(maxlen=500)
        self.start_failures = 0  #: boots that failed (a create, a restart), read by the control plane's alerts
        self.pools = {p.name: p for p in self.config.pools}
        self._sandboxes: dict[str, ManagedSandbox] = {}
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._closed = False
        self._workers = ThreadPoolExecutor(max_workers=8, thread_name_prefix="sandbox-worker")
        try:
            self.lease.acquire()  # ManagerBusy while another manager of this name runs
        except BaseException:
            self._workers.shutdown()
            self.store.close()
            raise
        self.monitor = HealthMonitor(self)
        warm_specs = (self.config.default_spec, *self.config.warm_pool.specs)
        labels = lambda sid, spec: self._labels(ManagedSandbox(sid, spec, self.backend, pool=spec.name))  # noqa: E731
        self.warm = WarmPool(self.config.warm_pool, self.backend, labels, warm_specs)
        try:
            reconcile(self)
        except BaseException:
            self.close(stop_sandboxes=False)
            raise
        track(self)
        if self.config.monitor_interval_s is not None:
            self.monitor.start()
        self.warm.start()  # after reconcile: it removes the warm sandboxes of a previous run
        self._wake.set()

    # ------------------------------------------------------------ basics
    def _labels(self, sb: ManagedSandbox) -> dict[str, str]:
        return {
            "rockroll.managed": "1",
            "rockroll.manager": self.config.name,
            "rockroll.sandbox": sb.id,
            "rockroll.generation": str(sb.generation),
            "rockroll.pool": sb.pool,
        }

    def persist(self, sb: ManagedSandbox) -> None:
        if sb.deleted:
            return
        try:
            self.store.save(sb.to_record(), unless=lambda: sb.deleted)  # a delete may have gone first
        except SQLAlchemyError as e:  # the database must not take the sandbox down
            log.warning("cannot persist sandbox %s: %s", sb.id, e)

    def active_count(self) -> int:
        return sum(1 for sb in self._sandboxes.values() if not sb.deleted)

    def _reserve(
        self, spec: SandboxSpec, pool: str, *, leased: bool = False, sandbox_id: str | None = None
    ) -> ManagedSandbox:
        with self._lock:
            if self._closed:
                raise SandboxError("the manager is closed")
            active = self.active_count()
            if active >= self.config.max_sandboxes:
                raise CapacityError(active, self.config.max_sandboxes)
            pc = self.pools.get(pool)
            if pc is not None and len(self.members(pool)) >= pc.max_total:
                raise CapacityError(len(self.members(pool)), pc.max_total, f"sandboxes in pool {pool!r}")
            sb = ManagedSandbox(sandbox_id or f"sb-{secrets.token_hex(6)}", spec, self.backend, pool=pool)
            sb.leased = leased
            sb._dirty = self._wake
            self._sandboxes[sb.id] = sb
            return sb

    def boot(self, sb: ManagedSandbox) -> ManagedSandbox:
        """Start ``sb``'s current generation and wait until its server answers."""
        try:
            sb.handle = self.backend.start(sb.id, sb.spec, labels=self._labels(sb))
            self.persist(sb)
            sb.last_health = self.backend.wait_ready(sb.handle, sb.spec.startup_timeout_s)
        except BaseException:
            self.start_failures += 1
            if sb.handle is not None:
                self.backend.stop(sb.handle)
            sb.handle, sb.state = None, SandboxState.UNHEALTHY  # the monitor retries it (or create() forgets it)
            raise
        sb.state, sb.failures = SandboxState.READY, 0
        sb.touch()
        self.persist(sb)
        return sb

    def create(self, spec: SandboxSpec | None = None, *, pool: str = "", leased: bool = False) -> ManagedSandbox:
        """A healthy sandbox: a warm one of ``spec`` when one is idle (see :mod:`rockroll.sandbox.warm`),
        else one started now (waiting until its server answers)."""
        spec = spec or self.config.default_spec
        if self.warm.enabled and self.active_count() < self.config.max_sandboxes:
            warm = self.warm.take(spec)
            if warm is not None:
                return self._hand_out(warm, spec, pool or spec.name, leased)
        sb = self._reserve(spec, pool or spec.name, leased=leased)
        try:
            return self.boot(sb)
        except BaseException:
            self._forget(sb)
            raise

    def _hand_out(self, warm: WarmSandbox, spec: SandboxSpec, pool: str, leased: bool) -> ManagedSandbox:
        """Make the warm sandbox ``warm`` (checked just now) a managed sandbox of ``spec`` and ``pool``."""
        try:
            sb = self._reserve(spec, pool, leased=leased, sandbox_id=warm.sandbox_id)
        except SandboxError:  # full since the check in create (or closed): it stays warm
            self.warm.give_back(warm)
            raise
        sb.handle, sb.last_health, sb.state = warm.handle, warm.health, SandboxState.READY
        sb.touch()
        # recorded in the background (commits are serial, ~15 ms each: the 64th of 64 hand-outs would wait
        # ~1 s); a manager that dies first removes the container when it starts again, as for acquire()
        with contextlib.suppress(RuntimeError):  # RuntimeError: closing
            self._workers.submit(self.persist, sb)
        return sb

    def get(self, sandbox_id: str) -> ManagedSandbox:
        sb = self._sandboxes.get(sandbox_id)
        if sb is None or sb.deleted:
            raise SandboxNotFound(sandbox_id)
        return sb

    def list(self) -> list[ManagedSandbox]:
        return [sb for sb in list(self._sandboxes.values()) if not sb.deleted]

    def members(self, pool: str) -> builtins.list[ManagedSandbox]:
        return [sb for sb in self.list() if sb.pool == pool]

    def _forget(self, sb: ManagedSandbox) -> None:
        with self._lock:
            sb.deleted = True
            sb.state = SandboxState.STOPPED
            self._sandboxes.pop(sb.id, None)
        self.store.delete(sb.id)

    def delete(self, sandbox_id: str) -> None:
        """Stop and remove a sandbox; its sessions raise SandboxLost."""
        sb = self.get(sandbox_id)
        with sb.lock:
            self._forget(sb)
            if sb.handle is not None:
                self.backend.stop(sb.handle)

    def restart(self, sandbox_id: str, reason: str = "requested") -> ManagedSandbox:
        """Replace the sandbox with a fresh one under the same id (blocking)."""
        sb = self.get(sandbox_id)
        self._invalidate(sb, force=True)
        return self._replace(sb, reason)

    def _invalidate(self, sb: ManagedSandbox, *, force: bool = False, generation: int | None = None) -> bool:
        """Mark ``sb`` restarting and bump its generation, so its sessions fail fast.

        With ``generation``, do nothing unless ``sb`` is still that generation (a probe that
        started before someone else replaced the sandbox must not replace it again).
        """
        with sb.lock:
            if sb.deleted or (sb.state == SandboxState.RESTARTING and not force):
                return False
            if generation is not None and generation != sb.generation:
                return False
            sb.state = SandboxState.RESTARTING
            sb.generation += 1
            sb.sessions = sb.opened = sb.stray_probes = 0
            return True

    def _replace(self, sb: ManagedSandbox, reason: str) -> ManagedSandbox:
        with sb.lock:
            if sb.deleted:
                raise SandboxNotFound(sb.id)
            log.info("replacing sandbox %s (%s)", sb.id, reason)
            if sb.handle is not None:
                try:
                    self.backend.stop(sb.handle)
                except Exception as e:  # noqa: BLE001 - e.g. the daemon refusing to remove a frozen container
                    sb.state = SandboxState.UNHEALTHY  # the monitor probes it again and retries the replacement
                    raise SandboxError(f"cannot stop sandbox {sb.id}'s old server: {type(e).__name__}: {e}") from e
            sb.handle = None
            sb.restarts += 1
            sb.state = SandboxState.RESTARTING
            self.restart_log.append(
                {
                    "time": time.time(),
                    "sandbox_id": sb.id,
                    "pool": sb.pool,
                    "generation": sb.generation,
                    "reason": reason,
                }
            )
            return self.boot(sb)

    def schedule_restart(self, sb: ManagedSandbox, reason: str, generation: int | None = None) -> None:
        """Invalidate ``sb`` now and replace it in the background (the monitor's auto-restart)."""
        if self._closed or not self._invalidate(sb, generation=generation):
            return

        def run() -> None:
            try:
                self._replace(sb, reason)
            except SandboxError as e:
                log.warning("replacing %s failed (%s); retrying on the next probe", sb.id, e)

        try:
            self._workers.submit(run)
        except RuntimeError:  # the manager is closing
            pass

    # ------------------------------------------------------------ close
    def wait_until(self, predicate: Callable[[], object], timeout_s: float = 30.0, interval_s: float = 0.02) -> bool:
        """Poll ``predicate()`` until true or ``timeout_s`` passes, at most ``interval_s`` apart (for tests and benches)."""
        return wait_until(predicate, timeout_s, max_delay_s=interval_s)

    def close(self, *, stop_sandboxes: bool = True) -> None:
        """Stop the monitor; with ``stop_sandboxes`` also stop and forget every sandbox.

        Idempotent: after a ``close(stop_sandboxes=False)`` the sandboxes belong to whichever
        manager adopts them next, and a second ``close`` leaves them alone.
        """
        if self._closed:
            return
        self._closed = True
        self.monitor.stop()
        self.warm.close()  # warm sandboxes are nobody's: stopped whether or not the others stay
        self._workers.shutdown(wait=True, cancel_futures=True)
        if stop_sandboxes:
            for sb in self.list():
                try:
                    self.delete(sb.id)
                except SandboxError as e:
                    log.warning("cannot delete %s: %s", sb.id, e)
        else:  # left for the next manager: outliving this process is now intended
            for sb in self.list():
                if sb.handle is not None:
                    self.persist(sb)  # a hand-out's record may have been a cancelled background write
                    self.backend.release(sb.handle)
        self.lease.release()
        self.store.close()

    def __enter__(self) -> SandboxManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
