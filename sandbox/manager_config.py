"""``ManagerConfig``: the settings of one :class:`~rockroll.sandbox.manager.SandboxManager`.

Its own module so the manager's helpers (:mod:`rockroll.sandbox.monitor`,
:mod:`rockroll.sandbox.reconcile`) can name it without importing the manager.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rockroll.sandbox.backends import BackendConfig, validate_backend_name
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.pool import PoolConfig
from rockroll.sandbox.process import DEFAULT_STATE_DIR

__all__ = ["ManagerConfig", "data_dir", "default_db_url"]


def data_dir() -> Path:
    """rockroll's user data directory (``platformdirs``; ``ROCKROLL_DATA_DIR`` overrides it)."""
    override = os.environ.get("ROCKROLL_DATA_DIR")
    if override:
        return Path(os.path.expanduser(override))
    import platformdirs

    return Path(platformdirs.user_data_dir("rockroll", appauthor=False))


def default_db_url() -> str:
    """Where a manager keeps its records unless told: one SQLite file in :func:`data_dir`, whatever the cwd."""
    return f"sqlite:///{data_dir() / 'sandboxes.db'}"


@dataclass(frozen=True)
class ManagerConfig:
    """Settings of one manager (every field has a working default).

    Attributes:
        name: labels this manager's sandboxes; a restarted manager with the same name adopts them.
        backend: a registered backend type (:func:`rockroll.sandbox.backends.backend_names`):
            ``auto`` (Docker when a daemon answers and the image exists, else process), ``docker``,
            ``process``...; or a :class:`~rockroll.sandbox.backends.BackendConfig` with its own options.
        docker_hosts: Docker daemon URLs (empty: the local default socket).
        db_url: SQLAlchemy URL of the sandbox records (default: ``sandboxes.db`` in the user data
            directory, :func:`default_db_url`); one manager per ``name`` may run on it at a time.
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
    backend: str | BackendConfig = "auto"
    docker_hosts: tuple[str, ...] = ()
    db_url: str = field(default_factory=default_db_url)
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
        if not isinstance(self.backend, BackendConfig):
            validate_backend_name(self.backend)  # UnknownBackendError (a ValueError) names close ones
        if self.max_sandboxes < 1 or self.failure_threshold < 1:
            raise ValueError("max_sandboxes and failure_threshold must be >= 1")
