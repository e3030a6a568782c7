"""The control plane's one ``Settings`` object (pydantic-settings, env prefix ``ROCKROLL_``).

Every field can be set from the environment (``ROCKROLL_PORT=9000``) or from ``rockroll serve``
options. Paths starting with ``~`` are expanded against the home directory of the server user.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rockroll.sandbox.backends import validate_backend_name

__all__ = ["Settings", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Settings(BaseSettings):
    """Configuration of ``rockroll serve``."""

    model_config = SettingsConfigDict(env_prefix="ROCKROLL_", extra="forbid")

    host: str = Field("127.0.0.1", description="Address to bind.")
    port: int = Field(8080, ge=0, le=65535, description="TCP port to bind (0: any free port).")
    backend: str = Field(
        "auto",
        description="Sandbox backend type (rockroll.sandbox.backends): auto uses Docker when a daemon answers, "
        "else processes; docker; process; or any registered one.",
    )
    database_url: str = Field(
        "sqlite:///~/.rockroll/rockroll.db", description="Any SQLAlchemy URL (sqlite, postgresql+psycopg...)."
    )
    dev_mode: bool = Field(False, description="Accept requests without a token (loopback binds only).")
    pool_size: int = Field(1, ge=0, le=64, description="Warm sandboxes kept for sessions.")
    max_sandboxes: int = Field(8, ge=1, le=1024, description="Most sandboxes at once.")
    max_sessions_per_sandbox: int = Field(64, ge=1, le=4096, description="Most env sessions per sandbox.")
    max_sandboxes_per_owner: int = Field(4, ge=1, le=1024, description="Most user sandboxes one token owner holds.")
    session_idle_ttl_s: float = Field(
        3600.0, gt=0, description="Close a session nobody used for this long (its sandbox slot is freed)."
    )
    max_upload_bytes: int = Field(5_000_000, ge=1024, description="Largest uploaded env source or wheel.")
    train_jobs: bool = Field(True, description="Accept train jobs (they run the trainer inside this server).")
    job_workers: int = Field(2, ge=1, le=64, description="Jobs that run at the same time.")
    log_level: str = Field("info", description="uvicorn log level.")
    sandbox_state_dir: str = Field("", description="Sockets and process workspaces (default /tmp/rockroll-sb-UID).")
    instance: str = Field(
        "",
        max_length=40,
        description="Name labelling this server's sandboxes (default: derived from the database URL).",
    )

    def resolved_database_url(self) -> str:
        """The database URL with ``~`` expanded in a SQLite path (its folder is created)."""
        url = self.database_url
        prefix = "sqlite:///"
        if url.startswith(prefix) and url[len(prefix) :] not in ("", ":memory:"):
            path = Path(os.path.expanduser(url[len(prefix) :]))
            path.parent.mkdir(parents=True, exist_ok=True)
            return prefix + str(path)
        return url

    def manager_name(self) -> str:
        """The sandbox manager's name: stable for one database, distinct between databases.

        A restarted server adopts the sandboxes labelled with it; servers on other databases
        never touch them.
        """
        if self.instance:
            return self.instance
        digest = hashlib.sha256(self.resolved_database_url().encode()).hexdigest()[:10]
        return f"api-{digest}"

    @field_validator("backend")
    @classmethod
    def _registered_backend(cls, value: str) -> str:
        return validate_backend_name(value)

    def check(self) -> None:
        """Raise ``ValueError`` for combinations that must not run."""
        if self.dev_mode and not is_loopback(self.host):
            raise ValueError(
                f"dev mode (no tokens) is only allowed on a loopback address, not {self.host!r}; "
                "bind 127.0.0.1 or create a token with `rockroll token create`"
            )
