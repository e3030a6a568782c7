"""``SandboxManager``: create, pool, monitor, restart, reap and persist sandboxes.

* create/get/list/delete/restart sandboxes, within ``max_sandboxes`` (else :class:`CapacityError`);
* warm pools per spec (:mod:`rockroll.sandbox.pool`), ``acquire``/``release``;
* ``open_session(env_id, **kwargs)`` places an env session on the least-loaded healthy sandbox
  of the spec (starting one when all are full) and returns a :class:`~rockroll.sandbox.session.RemoteSession`;
* a health monitor (:mod:`rockroll.sandbox.monitor`) replaces dead or unhealthy sandboxes under the same
  id (sessions of the old incarnation raise :class:`SandboxLost`), reaps idle ones after
  ``idle_ttl_s`` and tops pools up;
* records persist through SQLAlchemy (:mod:`rockroll.sandbox.store`); a new manager with the same ``name``
  reconciles on start: labelled containers/processes with a matching record are adopted, others
  removed, and records whose sandbox is gone are restarted, so nothing leaks.

Threat model: the manager is trusted and runs on the host; see each backend for isolation.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from rockroll.sandbox.base import SandboxBackend, SandboxSpec
from rockroll.sandbox.errors import CapacityError, SandboxError, SandboxLost, SandboxNotFound
from rockroll.sandbox.managed import ManagedSandbox
from rockroll.sandbox.monitor import HealthMonitor
from rockroll.sandbox.pool import PoolConfig
from rockroll.sandbox.process import DEFAULT_STATE_DIR
from rockroll.sandbox.session import RemoteSession
from rockroll.sandbox.store import SandboxStore

__all__ = ["SandboxManager", "ManagerConfig", "make_backend"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ManagerConfig:
    """Settings of one manager (every field has a working default).

    Attributes:
        name: labels this manager's sandboxes; a restarted manager with the same name adopts them.
        backend: ``auto`` (Docker when a daemon answers and the image exists, else process),
            ``docker`` or ``process``.
        docker_hosts: Docker daemon URLs (empty: the local default socket).
        db_url: SQLAlchemy URL of the sandbox records.
        state_dir: host directory for sockets and process workspaces (keep the path short).
        max_sandboxes: most sandboxes at once.
        default_spec: spec used when a call names none.
        pools: warm pools.
        monitor_interval_s: seconds between health probes (None: no monitor thread).
        failure_threshold: failed probes in a row before a live but silent sandbox is replaced.
        probe_timeout_s: timeout of one health probe.
        idle_ttl_s: delete sandboxes unused this long (None: never); pool minimums are kept.
        auto_restart: replace dead/unhealthy sandboxes (and restore lost ones on start).
    """

    name: str = "default"
    backend: str = "auto"
    docker_hosts: tuple[str, ...] = ()
    db_url: str = "sqlite:///.rockroll/sandboxes.db"
    state_dir: str = DEFAULT_STATE_DIR
    max_sandboxes: int = 8
    default_spec: SandboxSpec = field(default_factory=SandboxSpec)
    pools: tuple[PoolConfig, ...] = ()
    monitor_interval_s: float | None = 1.0
    failure_threshold: int = 2
    probe_timeout_s: float = 2.0
    idle_ttl_s: float | None = 600.0
    auto_restart: bool = True

    def __post_init__(self) -> None:
        if self.backend not in ("auto", "docker", "process"):
            raise ValueError(f"backend must be auto, docker or process, got {self.backend!r}")
        if self.max_sandboxes < 1 or self.failure_threshold < 1:
            raise ValueError("max_sandboxes and failure_threshold must be >= 1")


def make_backend(config: ManagerConfig) -> SandboxBackend:
    """The backend ``config.backend`` names (``auto``: Docker if usable, else processes)."""
    from rockroll.sandbox.process import ProcessBackend

    if config.backend == "process":
        return ProcessBackend(state_dir=config.state_dir)
    from rockroll.sandbox.docker_backend import DockerBackend
    from rockroll.sandbox.errors import BackendUnavailable

    try:
        backend = DockerBackend(hosts=config.docker_hosts, state_dir=config.state_dir)
        if config.backend == "auto" and not backend.has_image(config.default_spec.image):
            raise BackendUnavailable(f"image {config.default_spec.image} not built")
        return backend
    except BackendUnavailable:
        if config.backend == "docker":
            raise
        log.info("no usable Docker daemon; using the process backend")
        return ProcessBackend(state_dir=config.state_dir)


class SandboxManager:
    """See the module docstring.

    ``SandboxManager(name="x", backend="process")`` overrides config fields; ``backend`` may also be a
    :class:`SandboxBackend` instance.
    """

    def __init__(
        self, config: ManagerConfig | None = None, *, backend: SandboxBackend | str | None = None, **overrides: Any
    ) -> None:
        if isinstance(backend, str):
            overrides["backend"], backend = backend, None
        self.config = replace(config or ManagerConfig(), **overrides)
        self.backend = backend or make_backend(self.config)
        self.reconcile_report: dict[str, list[str]] = {}
        self.store = SandboxStore(self.config.db_url, self.config.name)
        self.pools = {p.name: p for p in self.config.pools}
        self._sandboxes: dict[str, ManagedSandbox] = {}
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._closed = False
        self._workers = ThreadPoolExecutor(max_workers=8, thread_name_prefix="sandbox-worker")
        from rockroll.sandbox.reconcile import reconcile

        reconcile(self)
        self.monitor = HealthMonitor(self)
        if self.config.monitor_interval_s is not None:
            self.monitor.start()
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
            self.store.save(sb.to_record())
        except Exception as e:  # noqa: BLE001 - the database must not take the sandbox down
            log.warning("cannot persist sandbox %s: %s", sb.id, e)

    def active_count(self) -> int:
        return sum(1 for sb in self._sandboxes.values() if not sb.deleted)

    def _reserve(self, spec: SandboxSpec, pool: str, *, leased: bool = False) -> ManagedSandbox:
        with self._lock:
            if self._closed:
                raise SandboxError("the manager is closed")
            active = self.active_count()
            if active >= self.config.max_sandboxes:
                raise CapacityError(active, self.config.max_sandboxes)
            pc = self.pools.get(pool)
            if pc is not None and len(self.members(pool)) >= pc.max_total:
                raise CapacityError(len(self.members(pool)), pc.max_total, f"sandboxes in pool {pool!r}")
            sb = ManagedSandbox(f"sb-{secrets.token_hex(6)}", spec, self.backend, pool=pool)
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
            if sb.handle is not None:
                self.backend.stop(sb.handle)
            sb.handle, sb.state = None, "unhealthy"  # the monitor retries it (or create() forgets it)
            raise
        sb.state, sb.failures = "ready", 0
        sb.touch()
        self.persist(sb)
        return sb

    def create(self, spec: SandboxSpec | None = None, *, pool: str = "", leased: bool = False) -> ManagedSandbox:
        """Start a sandbox and wait until it is healthy."""
        spec = spec or self.config.default_spec
        sb = self._reserve(spec, pool or spec.name, leased=leased)
        try:
            return self.boot(sb)
        except BaseException:
            self._forget(sb)
            raise

    def get(self, sandbox_id: str) -> ManagedSandbox:
        sb = self._sandboxes.get(sandbox_id)
        if sb is None or sb.deleted:
            raise SandboxNotFound(sandbox_id)
        return sb

    def list(self) -> list[ManagedSandbox]:
        return [sb for sb in list(self._sandboxes.values()) if not sb.deleted]

    def members(self, pool: str) -> list[ManagedSandbox]:
        return [sb for sb in self.list() if sb.pool == pool]

    def _forget(self, sb: ManagedSandbox) -> None:
        with self._lock:
            sb.deleted = True
            sb.state = "stopped"
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
            if sb.deleted or (sb.state == "restarting" and not force):
                return False
            if generation is not None and generation != sb.generation:
                return False
            sb.state = "restarting"
            sb.generation += 1
            sb.sessions = 0
            return True

    def _replace(self, sb: ManagedSandbox, reason: str) -> ManagedSandbox:
        with sb.lock:
            if sb.deleted:
                raise SandboxNotFound(sb.id)
            log.info("replacing sandbox %s (%s)", sb.id, reason)
            if sb.handle is not None:
                self.backend.stop(sb.handle)
            sb.handle = None
            sb.restarts += 1
            sb.state = "restarting"
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

    # ------------------------------------------------------------ pools
    def acquire(self, pool: str | None = None, timeout_s: float = 60.0) -> ManagedSandbox:
        """Lease an idle sandbox of ``pool`` (starting one if the pool may grow)."""
        name = pool or self.config.default_spec.name
        pc = self.pools.get(name)
        spec = pc.spec if pc else self.config.default_spec
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                for sb in self.members(name):
                    if sb.state == "ready" and not sb.leased and sb.sessions == 0:
                        sb.leased = True
                        sb.touch()
                        self._wake.set()
                        self._workers.submit(self.persist, sb)
                        return sb
            try:
                return self.create(spec, pool=name, leased=True)
            except CapacityError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def release(self, sb: ManagedSandbox) -> None:
        """Give a leased sandbox back: it is deleted and the pool refills."""
        if not sb.deleted:
            self.delete(sb.id)
        self._wake.set()

    # --------------------------------------------------------- sessions
    def open_session(self, env_id: str, *, spec: SandboxSpec | None = None, **kwargs: Any) -> RemoteSession:
        """An env session on the least-loaded healthy sandbox of ``spec`` (see module docstring)."""
        spec = spec or self.config.default_spec
        deadline = time.monotonic() + spec.startup_timeout_s
        full = lost = 0
        while full < 3:
            with self._lock:
                candidates = [
                    sb
                    for sb in self.members(spec.name)
                    if sb.state == "ready" and not sb.leased and sb.sessions < sb.spec.max_sessions
                ]
                best = min(candidates, key=lambda s: (s.load, s.last_used), default=None)
                if best is not None:
                    with best.lock:  # the counter's own lock: session_closed decrements under it
                        best.sessions += 1  # reserve the slot before leaving the manager lock
            if best is None:
                try:
                    best = self.create(spec, pool=spec.name)
                except CapacityError:
                    # at capacity, but a member still starting (another caller's, or a restart)
                    # will have free slots soon: wait for it rather than fail a burst of opens
                    if time.monotonic() > deadline or not self._coming_up(spec.name):
                        raise
                    time.sleep(0.02)
                    continue
                with best.lock:
                    best.sessions += 1
            try:
                return best.open_reserved(env_id, kwargs)
            except CapacityError:
                full += 1
            except SandboxLost:  # died since its last probe (now marked unhealthy): try another
                lost += 1
                if lost >= 3:
                    raise
        raise CapacityError(self.active_count(), self.config.max_sandboxes, "sandboxes with a free session slot")

    def _coming_up(self, pool: str) -> bool:
        """Whether a member of ``pool`` is starting or being replaced (it will take sessions)."""
        return any(sb.state in ("starting", "restarting") and not sb.leased for sb in self.members(pool))

    # ------------------------------------------------------------ close
    def wait_until(self, predicate: Any, timeout_s: float = 30.0, interval_s: float = 0.02) -> bool:
        """Poll ``predicate()`` until true or ``timeout_s`` passes (for tests and benches)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(interval_s)
        return False

    def close(self, *, stop_sandboxes: bool = True) -> None:
        """Stop the monitor; with ``stop_sandboxes`` also stop and forget every sandbox.

        Idempotent: after a ``close(stop_sandboxes=False)`` the sandboxes belong to whichever
        manager adopts them next, and a second ``close`` leaves them alone.
        """
        if self._closed:
            return
        self._closed = True
        self.monitor.stop()
        self._workers.shutdown(wait=True, cancel_futures=True)
        if stop_sandboxes:
            for sb in self.list():
                try:
                    self.delete(sb.id)
                except SandboxError as e:
                    log.warning("cannot delete %s: %s", sb.id, e)
        self.store.close()

    def __enter__(self) -> SandboxManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
