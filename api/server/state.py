"""Everything one running app holds: settings, database, catalog, placement, sessions, jobs, metrics.

Also each job's metric history and the sandbox manager's restart log, kept in the database too
(:mod:`rockroll.api.server.history`): the page plots them, after a restart as before it.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rockroll.api.alerts.engine import AlertEngine
from rockroll.api.db import Database
from rockroll.api.envs.catalog import Catalog
from rockroll.api.jobs.runner import JobRunner
from rockroll.api.nodes.revocations import RevocationWatch
from rockroll.api.nodes.store import NodeStore
from rockroll.api.nodes.table import NodeTable
from rockroll.api.nodes.watch import NodeWatch
from rockroll.api.sandboxes.ttl import ExpiryReaper
from rockroll.api.sandboxes.views import Counts
from rockroll.api.server.auth import Principal
from rockroll.api.server.history import MetricHistory, RestartLog
from rockroll.api.server.metrics import Metrics
from rockroll.api.server.periodic import Periodic
from rockroll.api.server.settings import REPLICA_SEP, Settings
from rockroll.api.sessions.live import Placer, SessionRegistry
from rockroll.sandbox.errors import SandboxLost
from rockroll.sandbox.lease import ManagerBusy, live_leases
from rockroll.sandbox.node.agent import NodeAgent
from rockroll.sandbox.node.tokens import SessionTokens
from rockroll.sandbox.session import EnvSession, RemoteSession

if TYPE_CHECKING:
    from rockroll.api.nodes.placement import Placement

__all__ = ["AppState", "MetricHistory", "build_state"]

log = logging.getLogger("rockroll.api")

#: the owner of job sessions opened without one (sandboxes no token owner sees); jobs should pass theirs
JOBS_OWNER = ""


@dataclass
class AppState:
    """The app's long-lived objects (``app.state.rr``)."""

    settings: Settings
    db: Database
    catalog: Catalog
    placement: Placement
    sessions: SessionRegistry
    jobs: JobRunner
    metrics: Metrics
    started_at: float = field(default_factory=time.time)
    token_cache: dict[str, tuple[float, Principal | None]] = field(default_factory=dict)  # None: unknown
    metric_history: MetricHistory = field(default_factory=MetricHistory)
    expiry: ExpiryReaper | None = None  # the reaper of expired user sandboxes
    tokens: SessionTokens | None = None  # signs the data plane's session tokens
    nodes: NodeTable | None = None  # the node agents sessions are placed on (rockroll.api.nodes.table)
    agent: NodeAgent | None = None  # the embedded node agent (Settings.embedded_node)
    watchers: list[Periodic] = field(default_factory=list)  # background duties: node watch, revocations, alerts
    alerts: AlertEngine | None = None  # the alert engine, one of the watchers

    def close(self) -> None:
        """Stop jobs, close sessions, stop the manager (and the sandboxes with ``stop_sandboxes_on_exit``;
        otherwise they stay up for the next server), close the database."""
        for watcher in self.watchers:
            watcher.close()
        self.jobs.close()
        self.sessions.close_all()
        if self.expiry is not None:
            self.expiry.close()
        self.placement.close(stop_sandboxes=self.settings.stop_sandboxes_on_exit)
        if self.nodes is not None:
            self.nodes.close()
        self.db.close()


def check_deployment(settings: Settings, db: Database) -> None:
    """Replicas and a lone server never share a database: :class:`ManagerBusy` when the other kind runs there.

    The same leases that keep two servers of one name apart: a lone server holds the deployment's
    name, each replica that name plus its id.
    """
    base = settings.deployment_name()
    held = live_leases(db.engine, prefix=base)
    if settings.replica and base in held:
        raise ManagerBusy(base, "this database", 0, 0.0, hint="a server that is not a replica runs on it")
    replicas = sorted(n for n in held if n.startswith(base + REPLICA_SEP))
    if not settings.replica and replicas:
        raise ManagerBusy(base, "this database", 0, 0.0, hint=f"replicas run on it ({', '.join(replicas)}): "
                          "start this server with --replica ID")  # fmt: skip


def build_state(settings: Settings) -> AppState:
    """Open the database (migrating it), the catalog and the sandbox manager."""
    settings.check()
    db = Database(settings.resolved_database_url())
    db.migrate()
    check_deployment(settings, db)
    catalog = Catalog(db)
    placement = _placement(settings, db)
    placement.start_reaper()
    expiry = ExpiryReaper(db, placement)
    expiry.start()
    holder: dict[str, AppState] = {}

    def snapshot() -> Counts:
        snap = placement.snapshot()
        snap["sessions"] = len(holder["s"].sessions) if "s" in holder else 0
        return snap

    def open_env(env: str, kwargs: dict[str, Any], *, owner: str = JOBS_OWNER) -> RemoteSession:
        """An env session of ``owner`` in a sandbox serving ``owner`` only (the placement places it)."""
        env_id = catalog.resolve(env, owner)  # exact ids; another owner's private env is unknown (404)
        return placement.open_session(env_id, kwargs, custom=catalog.custom(env_id, owner), owner=owner)

    secret = settings.cluster_secret or secrets.token_urlsafe(32)
    tokens = SessionTokens(secret, ttl_s=settings.session_token_ttl_s)
    agent = None
    if settings.embedded_node:
        capacity = settings.max_sandboxes * settings.max_sessions_per_sandbox
        agent = NodeAgent("local", tokens, capacity=capacity, endpoint=settings.public_url.rstrip("/"))
    nodes = NodeTable(secret, agent, NodeStore(db))
    nodes.sync()  # the agents registered before this start (their sessions outlive a control-plane restart)

    place = _node_placer(catalog, placement, nodes)

    metrics = Metrics(snapshot)
    server = placement.manager.lease.tag
    sessions = SessionRegistry(db, open_env, metrics, place=place, agent=agent, nodes=nodes, server=server)
    sessions.start_reaper(
        settings.session_idle_ttl_s, interval_s=min(settings.session_reap_interval_s, settings.session_idle_ttl_s / 2)
    )

    jobs = JobRunner.from_settings(
        db, open_env, settings, runner=server, resolve_env=catalog.resolve, sandboxes=placement
    )
    state = AppState(
        settings,
        db,
        catalog,
        placement,
        sessions,
        jobs,
        metrics,
        expiry=expiry,
        tokens=tokens,
        nodes=nodes,
        agent=agent,
    )
    state.alerts = AlertEngine(state)
    for watcher in (NodeWatch(nodes), RevocationWatch(db, nodes, agent), state.alerts):
        watcher.start()
        state.watchers.append(watcher)
    state.metric_history = MetricHistory(db)  # read back from the database for jobs of earlier runs
    state.metric_history.watch(jobs)
    RestartLog.install(db, placement.manager)
    holder["s"] = state
    jobs.recover()
    return state


def _placement(settings: Settings, db: Database) -> Placement:
    """The server's sandbox placement (its manager, pool and limits) from ``settings``."""
    from rockroll.api.nodes.placement import Placement

    state_dir = settings.sandbox_state_dir or f"/tmp/rockroll-sb-{os.getuid()}"
    return Placement(
        backend=settings.backend,
        db_url=settings.resolved_database_url(),
        state_dir=state_dir,
        max_sandboxes=settings.max_sandboxes,
        max_sessions_per_sandbox=settings.max_sessions_per_sandbox,
        pool_size=settings.pool_size,
        warm_pool_size=settings.warm_pool_size,
        db=db,
        max_sandboxes_per_owner=settings.max_sandboxes_per_owner,
        idle_ttl_s=settings.sandbox_idle_ttl_s,
        manager_name=settings.manager_name(),
        min_isolation=settings.min_isolation,
        adopt_timeout_s=settings.sandbox_adopt_timeout_s,
    )


def _node_placer(catalog: Catalog, placement: Placement, nodes: NodeTable) -> Placer:
    """The :class:`SessionRegistry`'s ``place``: a new session on a node agent, or on this server's sandboxes."""

    def place(
        session_id: str,
        env: str,
        kwargs: dict[str, Any],
        owner: str,
        *,
        spread: Mapping[str, int] | None = None,
        avoid: Collection[str] = (),
        before_open: Callable[[str], None] | None = None,
    ) -> tuple[EnvSession, str]:
        """Open a session on a node agent (:meth:`NodeTable.pick`; custom envs: on this server's sandboxes).

        ``before_open(node_id)`` runs once the agent is chosen, before it is asked (the session's row is
        written first, so no session on an agent is ever without one)."""
        env_id = catalog.resolve(env, owner)
        custom = catalog.custom(env_id, owner)
        for _attempt in range(3):
            node = None if custom is not None else nodes.pick(spread, avoid)
            if node is None or node.local is not None:  # the embedded agent serves it (SessionRegistry attaches it)
                return placement.open_session(env_id, kwargs, custom=custom, owner=owner), ""
            if before_open is not None:
                before_open(node.id)
            assert node.admin is not None  # a standalone agent's entry (the embedded one's is local)
            try:
                return node.admin.open(session_id, env_id, kwargs, owner), node.id
            except SandboxLost:  # the agent did not answer: out of placement until it registers again
                nodes.mark_down(node.id)
        raise SandboxLost("", "no node agent answered; try again")

    return place
