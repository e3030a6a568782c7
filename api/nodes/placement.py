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
sandboxes. Picking the sandbox and reserving the slot is :class:`rockroll.api.nodes.slots.SessionSlots`.

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
from rockroll.api.nodes.slots import SessionSlots
from rockroll.api.sandboxes.owners import OwnerLedger, base_pool, owner_pool
from rockroll.api.sandboxes.views import Counts, describe, pool_views, snapshot
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.confinement import IsolationTooWeak, enforce
from rockroll.sandbox.errors import SandboxError, SandboxLost, SandboxNotFound
from rockroll.sandbox.managed import ManagedSandbox, SandboxState
from rockroll.sandbox.manager import ManagerConfig, SandboxManager
from rockroll.sandbox.pool import PoolConfig, WarmPoolConfig
from rockroll.sandbox.process import ProcessBackend
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
        self.slots = SessionSlots(self.manager, self.owners, warm_pool=SESSION_POOL, delete=self.delete)
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
            # outside _open_slots: a sandbox booting for one owner holds up no other
            sb = self.slots.reserve(owner, spec, pool)
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
        with self.slots.lock:
            surplus = len(self.slots.idle_warm()) - self.pools[SESSION_POOL].min_idle
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
        with self.owners.reserve(owner, live, self.slots.used()):
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
