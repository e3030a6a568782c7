"""``ManagerConfig``: the settings of one :class:`~rockroll.sandbox.manager.SandboxManager`.

Its own module so the manager's helpers (:mod:`rockroll.sandbox.monitor`,
:mod:`rockroll.sandbox.reconcile`) can name it without importing the manager.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ConfigDict, Field, field_validator

from rockroll.envs.config import ConfigModel
from rockroll.sandbox.backends import BackendConfig, validate_backend_name
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.pool import PoolConfig, WarmPoolConfig
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


class ManagerConfig(ConfigModel):
    """Settings of one manager (every field has a working default; frozen and hashable)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(
        default="default",
        description="labels this manager's sandboxes; a restarted manager with the same name adopts them",
    )
    backend: str | BackendConfig = Field(
        default="auto",
        description="a registered backend type (rockroll.sandbox.backends.backend_names): auto (Docker when a "
        "daemon answers and the image exists, else process), docker, process...; or a BackendConfig with its "
        "own options",
    )
    docker_hosts: tuple[str, ...] = Field(
        default=(), description="Docker daemon URLs (empty: the local default socket)"
    )
    db_url: str = Field(
        default_factory=default_db_url,
        description="SQLAlchemy URL of the sandbox records (default: sandboxes.db in the user data directory); "
        "one manager per name may run on it at a time",
    )
    state_dir: str = Field(
        default=DEFAULT_STATE_DIR, description="host directory for sockets and process workspaces (keep the path short)"
    )
    max_sandboxes: int = Field(default=8, ge=1, description="most sandboxes at once")
    default_spec: SandboxSpec = Field(default_factory=SandboxSpec, description="spec used when a call names none")
    pools: tuple[PoolConfig, ...] = Field(default=(), description="named pools of idle sandboxes leased with acquire()")
    warm_pool: WarmPoolConfig = Field(
        default_factory=WarmPoolConfig,
        description="started sandboxes per spec that create() hands out (size 0: off; rockroll.sandbox.warm)",
    )
    monitor_interval_s: float | None = Field(
        default=1.0, gt=0, description="seconds between health probes (null: no monitor thread)"
    )
    failure_threshold: int = Field(
        default=2, ge=1, description="failed probes in a row before a live but silent sandbox is replaced"
    )
    probe_timeout_s: float = Field(default=2.0, gt=0, description="timeout of one health probe")
    idle_ttl_s: float | None = Field(
        default=600.0, gt=0, description="delete sandboxes unused this long (null: never); pool minimums are kept"
    )
    auto_restart: bool = Field(
        default=True, description="replace dead or unhealthy sandboxes (and restore lost ones on start)"
    )
    replace_stray: bool = Field(
        default=False,
        description="replace a shared sandbox that holds sessions while this manager holds none there, for "
        "monitor.STRAY_PROBES probes in a row (set where sessions never outlive their manager: the API, a node "
        "agent); off, an adopted sandbox's sessions play on under the next manager",
    )

    @field_validator("backend")
    @classmethod
    def _registered(cls, backend: str | BackendConfig) -> str | BackendConfig:
        if isinstance(backend, str):
            validate_backend_name(backend)  # UnknownBackendError (a ValueError) lists the types, names close ones
        return backend
