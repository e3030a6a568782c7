"""The one adapter between the control plane and the sandbox layer.

:class:`Placement` owns a :class:`rockroll.sandbox.SandboxManager` and exposes what the routes need:
placing env sessions on pooled sandboxes, user sandboxes (created leased, so no session is placed
on them), ``exec``, files, restarts and counts for health and metrics. Sandboxes are started with
the custom-env plugin hook (:mod:`rockroll.sandbox.server.plugins`): each custom env gets a pool of
its own whose sandboxes receive the env's files through the file API before its first session, so
custom code loads inside those sandboxes only, never in the control plane nor next to other envs'
sessions.

A sandbox serves one owner (:mod:`rockroll.api.sandboxes.owners`): a session of owner X lands on
the least-loaded sandbox of X's pool for that spec (``sessions@<X>``, ``env-<fp>@<X>``); when
none has a free slot, X takes an idle sandbox of the warm pool (which the monitor then refills)
or starts one, within X's quota. Sandboxes that hosted no session for ``idle_ttl_s`` are stopped
(:meth:`Placement.reap_idle`), except the warm pool's ``pool_size`` unassigned ones and user
sandboxes.

Threat model: the control plane is trusted; everything read back from a sandbox is untrusted data
and is only returned as JSON. Owners are untrusted: one owner's sessions never share a sandbox
with another's, and one owner cannot hold more than its quota nor the last free sandbox.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from rockroll.api.db import Database
from rockroll.api.sandboxes.owners import OwnerLedger, base_pool, owner_pool
from rockroll.api.sandboxes.views import Counts, describe, pool_views, snapshot
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.confinement import IsolationTooWeak, enforce
from rockroll.sandbox.errors import CapacityError, SandboxError, SandboxLost, SandboxNotFound
from rockroll.sandbox.managed import ManagedSandbox, SandboxState
from rockroll.sandbox.manager import ManagerConfig, SandboxManager
from rockroll.sandbox.pool import PoolConfig, WarmPoolConfig
from rockroll.sandbox.process import ProcessBackend
from rockroll.sandbox.retry import wait_until
from rockroll.sandbox.server.plugins import DEFAULT_PLUGIN_DIR, PLUGINS_ENV
from rockroll.sandbox.session import RemoteSession

if TYPE_CHECKING:
    from rockroll.api.envs.catalog import CustomEnv

__all__ = ["Placement", "SESSION_POOL"]

log = logging.getLogger("rockroll.api")

SESSION_POOL = "sessions"
OPEN_CONCURRENCY = 4
OPEN_ATTEMPTS = 3


class Placement:
    """Sandboxes and env sessions for the API (see the module docstring)."""

    def __init__(
        self,
        *,
        backend: str,
        db_url: str,
        state_dir: str,
        max_sandboxes: int,
        max_sessions_per_sandbox: int,
        pool_size: int,
        db: Database,
        warm_pool_size: int = 0,
        max_sandboxes_per_owner: int = 4,
        idle_ttl_s: float = 600.0,
        manager_name: str = "api",
        min_isolation: str | None = None,
        adopt_timeout_s: float | None = None,
    ) -> None:
        self._provisioned: set[tuple[str, int]] = set()
        self._pick_lock = threading.Lock()
        self._grow_locks: dict[str, threading.Lock] = {}
        self._open_slots = threading.BoundedSemaphore(OPEN_CONCURRENCY)
        self._stop = threading.Event()
        self.idle_ttl_s = idle_ttl_s
        self.reaped = 0
        self.owners = OwnerLedger(db, per_owner=max_sandboxes_per_owner, total=max_sandboxes)
        self.session_spec = self.spec(name=SESSION_POOL, max_sessions=max_sessions_per_sandbox)
        pools = (PoolConfig(spec=self.session_spec, min_idle=min(pool_size, max_sandboxes), max_total=max_sandboxes),)
        config = ManagerConfig(
            name=manager_name,
            backend=backend,
            db_url=db_url,
            state_dir=state_dir,
            max_sandboxes=max_sandboxes,
            default_spec=self.session_spec,
            pools=pools,
            idle_ttl_s=None,  # reap_idle below: it also drops the owner records
            replace_stray=True,  # the API's env sessions live in its memory: none outlives this server
            warm_pool=WarmPoolConfig(size=warm_pool_size, max_total=max(1, min(64, warm_pool_size * 4))),
        )
        self.manager = SandboxManager(config)
        self.backend_name = self.manager.backend.name
        try:
            self.isolation = enforce(self.manager.backend, min_isolation)
        except IsolationTooWeak:
            self.manager.close()
            raise
        if adopt_timeout_s is not None and isinstance(self.manager.backend, ProcessBackend):
            self.manager.backend.adopt_timeout_s = adopt_timeout_s  # a handed-over sandbox nobody adopts stops
        self.pools = {p.name: p for p in pools}
        self._adopt_owners()
        self._drop_orphaned_sessions()

    def _drop_orphaned_sessions(self) -> None:
        """Replace adopted session sandboxes that still host env sessions of a dead server.

        The API keeps its sessions in memory, so after a crash (SIGKILL) their env sessions live
        on in the adopted sandboxes with nobody to close them: they would hold session slots
        forever. Leased (user) sandboxes are left alone: the API places no env sessions on them.
        """
        for sb in self.manager.list():
            if not sb.leased and sb.sessions > 0:
                self.manager.schedule_restart(sb, f"{sb.sessions} sessions of a previous server")

    def _adopt_owners(self) -> None:
        """Adopted session sandboxes keep serving their recorded owner; those with none are stopped.

        A sandbox outside the warm pool without an owner record (a crash between claiming and
        recording it, or a pool of an older server) is never handed to anyone: it is deleted.
        """
        shared = [sb for sb in self.manager.list() if not sb.leased]
        owners = self.owners.load(sb.id for sb in shared)
        strays = []
        for sb in shared:
            owner = owners.get(sb.id)
            if owner is None:
                if sb.pool != SESSION_POOL:
                    strays.append(sb.id)
            elif sb.pool != owner_pool(base_pool(sb.pool), owner):
                sb.pool = owner_pool(base_pool(sb.pool), owner)
                self.manager.persist(sb)
        for sid in strays:
            log.info("stopping sandbox %s: it serves no recorded owner", sid)
            self.delete(sid)

    # -------------------------------------------------------------- specs
    def spec(self, **fields: Any) -> SandboxSpec:
        """A sandbox spec whose server can load the API's custom envs (see module docstring)."""
        env = dict(fields.pop("env", {}) or {})
        env.setdefault("ROCKROLL_ENV_MODULES", "rockroll.sandbox.server.plugins")
        env.setdefault(PLUGINS_ENV, DEFAULT_PLUGIN_DIR)
        return SandboxSpec(env=tuple(sorted(env.items())), **fields)

    def spec_for_custom(self, custom: CustomEnv) -> SandboxSpec:
        """The spec of a custom env's own pool (its image, if it brings one)."""
        base = self.session_spec.to_dict()
        base.update(name=f"env-{custom.fingerprint()}")
        if custom.kind == "image" and custom.image:
            base["image"] = custom.image
        return SandboxSpec.from_dict(base)

    # ----------------------------------------------------------- sessions
    def open_session(
        self, env_id: str, kwargs: dict[str, Any], custom: CustomEnv | None = None, *, owner: str | None = None
    ) -> RemoteSession:
        """Place an env session of ``owner`` on the least-loaded sandbox of ``owner``'s pool.

        ``owner`` defaults to the custom env's owner (its validation at registration).

        Built-in envs go to the owner's ``sessions`` pool, a custom env to the owner's pool of that
        env, whose sandboxes get its files first. At most ``OPEN_CONCURRENCY`` opens connect at
        once: each opens a new connection to an in-sandbox server, whose listen backlog is small
        (a burst of connects gets EAGAIN).
        """
        if owner is None:
            if custom is None:
                raise ValueError("open_session needs the owner of the session")
            owner = str(custom.owner)
        spec = self.session_spec if custom is None else self.spec_for_custom(custom)
        pool = owner_pool(spec.name, owner)
        for attempt in range(OPEN_ATTEMPTS):
            sb = self._slot(owner, spec, pool)  # outside _open_slots: a sandbox booting for one owner holds up no other
            with self._open_slots:
                try:
                    if custom is not None:
                        self._provision(sb, custom)
                except BaseException:
                    sb.session_closed()
                    raise
                try:
                    return sb.open_reserved(env_id, kwargs)
                except SandboxLost:  # died since its last probe (now unhealthy): try another
                    if attempt == OPEN_ATTEMPTS - 1:
                        raise
        raise SandboxLost("", f"no healthy sandbox after {OPEN_ATTEMPTS} attempts")

    def _provision(self, sb: ManagedSandbox, custom: CustomEnv) -> None:
        """Write a custom env's files into ``sb`` once per incarnation."""
        key = (sb.id, sb.generation)
        if key not in self._provisioned:
            for rel, data in custom.files().items():
                sb.write_file(f"{DEFAULT_PLUGIN_DIR}/{rel}", data)
            self._provisioned.add(key)

    def _slot(self, owner: str, spec: SandboxSpec, pool: str) -> ManagedSandbox:
        """A sandbox of ``pool`` with one session slot reserved for the caller.

        One sandbox is added to a pool at a time (its lock): a burst of opens waits for it
        instead of each starting one.
        """
        sb = self._take_slot(pool)
        if sb is not None:
            return sb
        with self._pick_lock:
            grow = self._grow_locks.setdefault(pool, threading.Lock())
        with grow:
            if self._coming_up(pool):  # a member being replaced takes sessions again soon
                wait_until(lambda: not self._coming_up(pool), spec.startup_timeout_s)
            sb = self._take_slot(pool)
            if sb is not None:
                return sb
            return self._add_member(owner, spec, pool)

    def _take_slot(self, pool: str) -> ManagedSandbox | None:
        """Reserve a slot on the least-loaded ready member of ``pool`` with a free one (or None)."""
        with self._pick_lock:
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
        with self.owners.reserve(owner, live, self._used()):
            sb = self._claim_warm(pool) if spec.name == SESSION_POOL else None
            if sb is None:
                sb = self._create(spec, pool)
                with self._pick_lock:
                    self._reserve_slot(sb)
            try:
                self.owners.assign(sb.id, owner)
            except BaseException:
                self.delete(sb.id)
                raise
            self.manager.persist(sb)
            return sb

    def _idle_warm(self) -> list[ManagedSandbox]:
        """The warm pool's ready, unassigned members without sessions (call under the pick lock)."""
        return [
            sb
            for sb in self.manager.members(SESSION_POOL)
            if sb.state == SandboxState.READY and not sb.leased and sb.sessions == 0
        ]

    def _used(self) -> int:
        """Sandboxes that count against ``max_sandboxes``: all but the idle warm ones (they make room)."""
        with self._pick_lock:
            return self.manager.active_count() - len(self._idle_warm())

    def _claim_warm(self, pool: str) -> ManagedSandbox | None:
        """Move an idle warm sandbox into ``pool`` with a slot reserved (the monitor refills the pool)."""
        with self._pick_lock:
            idle = self._idle_warm()
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
            with self._pick_lock:
                idle = self._idle_warm()
                victim = idle[0] if idle else None
                if victim is None:
                    raise
                victim.leased = True  # no session is placed on it any more
            self.delete(victim.id)
            return self.manager.create(spec, pool=pool)

    def drop_custom_pool(self, custom: CustomEnv) -> None:
        """Delete the sandboxes of a custom env's pools, every owner's (after the env is deleted)."""
        name = self.spec_for_custom(custom).name
        for sb in self.manager.list():
            if base_pool(sb.pool) == name and not sb.leased:
                try:
                    self.delete(sb.id)
                except SandboxNotFound:
                    pass

    # ------------------------------------------------------------ reaping
    def reap_idle(self, ttl_s: float | None = None) -> list[str]:
        """Stop session sandboxes that hosted no session for ``ttl_s`` (default ``idle_ttl_s``).

        The warm pool keeps its ``pool_size`` unassigned members; user (leased) sandboxes are
        their owner's to delete. Returns the ids stopped.
        """
        ttl = self.idle_ttl_s if ttl_s is None else ttl_s
        now = time.monotonic()
        victims = []
        with self._pick_lock:
            surplus = len(self._idle_warm()) - self.pools[SESSION_POOL].min_idle
            for sb in self.manager.list():
                if sb.leased or sb.state != SandboxState.READY or sb.sessions or now - sb.last_used < ttl:
                    continue
                if sb.pool == SESSION_POOL:
                    if surplus <= 0:
                        continue
                    surplus -= 1
                sb.leased = True  # taken out of placement before it is stopped
                victims.append(sb.id)
        for sid in victims:
            log.info("stopping sandbox %s: no session for %.0f s", sid, ttl)
            try:
                self.delete(sid)
            except SandboxError as e:
                log.warning("cannot stop idle sandbox %s: %s", sid, e)
        self.reaped += len(victims)
        return victims

    def start_reaper(self, interval_s: float | None = None) -> None:
        """Run :meth:`reap_idle` every ``interval_s`` (default: half the TTL, at most 30 s) until closed."""
        interval = interval_s or max(0.1, min(30.0, self.idle_ttl_s / 2))

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.reap_idle()
                except Exception:  # noqa: BLE001 - the reaper must survive anything
                    log.exception("sandbox reaper failed")

        threading.Thread(target=loop, name="sandbox-reaper", daemon=True).start()

    # ---------------------------------------------------------- sandboxes
    def create_sandbox(self, owner: str | None = None, **fields: Any) -> ManagedSandbox:
        """A sandbox for one user (leased: sessions are never placed on it).

        With ``owner``, the owner's quota is checked (429) and the owner recorded, atomically with
        the session sandboxes placed at the same time.
        """
        spec = self.spec(**fields)
        if owner is None:
            return self.manager.create(spec, pool=spec.name, leased=True)
        live = {sb.id for sb in self.manager.list()}
        with self.owners.reserve(owner, live, self._used()):
            sb = self.manager.create(spec, pool=spec.name, leased=True)
            self.owners.assign(sb.id, owner)
            return sb

    def get(self, sandbox_id: str) -> ManagedSandbox:
        """A managed sandbox (``SandboxNotFound`` when none)."""
        return self.manager.get(sandbox_id)

    def list(self) -> list[ManagedSandbox]:
        """Every live managed sandbox."""
        return self.manager.list()

    def delete(self, sandbox_id: str) -> None:
        """Stop and forget a sandbox (and its owner record)."""
        try:
            self.manager.delete(sandbox_id)
        finally:
            self.owners.forget([sandbox_id])

    def stop(self, sandbox_id: str) -> None:
        """Stop a sandbox but keep its owner record (an expired user sandbox: :mod:`rockroll.api.sandboxes.ttl`)."""
        self.manager.delete(sandbox_id)

    def restart(self, sandbox_id: str) -> ManagedSandbox:
        """Replace a sandbox under the same id (blocking)."""
        return self.manager.restart(sandbox_id, reason="restarted through the API")

    # ------------------------------------------------------------- views
    describe = staticmethod(describe)

    def snapshot(self) -> Counts:
        """Counts for health and metrics."""
        counts = snapshot(self.manager)
        counts["reaped"] = self.reaped
        return counts

    def pool_views(self) -> builtins.list[dict[str, object]]:
        """Every pool (owners' pools counted under their spec's pool) and user sandboxes."""
        return pool_views(self.manager, self.pools)

    def close(self, stop_sandboxes: bool = False) -> None:
        """Stop the reaper and the manager (sandboxes stay up for the next start unless ``stop_sandboxes``)."""
        self._stop.set()
        self.manager.close(stop_sandboxes=stop_sandboxes)
