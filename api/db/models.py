"""SQLAlchemy models of the control plane (tables are prefixed ``api_``).

They derive from rockroll's one declarative base, :class:`rockroll.sandbox.models.Base` (re-exported
here), whose sandbox records live in the same database. Here live what the control plane owns:
tokens, custom env specs, the owner of each sandbox and session, and jobs. Their migrations are in
``api/db/migrations`` (see :mod:`rockroll.sandbox.db`).
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy import JSON, Boolean, Float, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from rockroll.client.job_state import JobState
from rockroll.sandbox.models import Base

__all__ = [
    "Base",
    "TokenRecord",
    "EnvRecord",
    "SandboxOwner",
    "SessionRecord",
    "JobRecord",
    "NodeRecord",
    "JobMetricPoint",
    "RestartEvent",
    "owns_api_table",
]


def owns_api_table(name: str) -> bool:
    """Whether ``name`` is one of the control plane's tables (those of ``api/db/migrations``)."""
    return name.startswith("api_")


class TokenRecord(Base):
    """A bearer token, stored as its SHA-256 hash (tokens are 256-bit random, so no salt is needed)."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float, default=time.time)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class EnvRecord(Base):
    """A custom env registered through the API (built-in envs are not stored).

    ``env_id`` is namespaced by its owner (``alice/Maze-v0``); ``visibility`` is ``private`` (its owner
    and admins only) or ``public`` (everyone sees and uses it).
    """

    __tablename__ = "api_envs"

    env_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    version: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str] = mapped_column(String(128), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # entry_point | image | source
    entry_point: Mapped[str] = mapped_column(String(256), default="")
    image: Mapped[str] = mapped_column(String(256), default="")
    source_name: Mapped[str] = mapped_column(String(256), default="")
    source: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    kwargs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    max_steps: Mapped[int | None] = mapped_column(Integer, nullable=True)
    description: Mapped[str] = mapped_column(Text, default="")
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[float] = mapped_column(Float, default=time.time)
    visibility: Mapped[str] = mapped_column(String(16), default="private", server_default="private")


class SandboxOwner(Base):
    """Which token owner created a sandbox through the API."""

    __tablename__ = "api_sandboxes"

    sandbox_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128), index=True)
    created_at: Mapped[float] = mapped_column(Float, default=time.time)
    #: when the server stops it (its ``ttl_s`` after creation); ``None``: no lifetime (older records)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True, default=None)


class SessionRecord(Base):
    """An env session opened through the API, and where it was placed."""

    __tablename__ = "api_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128), index=True)
    env_id: Mapped[str] = mapped_column(String(128))
    kwargs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    sandbox_id: Mapped[str] = mapped_column(String(64), index=True)
    steps: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[float] = mapped_column(Float, default=time.time)
    closed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: the node agent serving it ('' : this server's own sandboxes, without an agent); any control-plane
    #: replica finds a session on a standalone agent through this
    node_id: Mapped[str] = mapped_column(String(64), default="", server_default="", index=True)
    system_prompt: Mapped[str] = mapped_column(Text, default="", server_default="")
    #: the rollout group it was opened for ('' : none): placement spreads a group's sessions over nodes
    group_key: Mapped[str] = mapped_column(String(128), default="", server_default="", index=True)
    #: the server (its sandbox manager's lease name) that opened it: another replica adopts the
    #: session for idle reaping once that server's lease has lapsed
    server: Mapped[str] = mapped_column(String(128), default="", server_default="")
    #: the client's ``Idempotency-Key`` of the open (unique per owner): a resent open finds this session
    open_key: Mapped[str | None] = mapped_column(String(64), nullable=True, default=None)
    #: SHA-256 of the open's body (env, kwargs, group, avoided nodes): the same key with another body is refused
    open_hash: Mapped[str | None] = mapped_column(String(64), nullable=True, default=None)

    __table_args__ = (sa.UniqueConstraint("owner", "open_key", name="uq_api_sessions_owner_open_key"),)


class JobRecord(Base):
    """A train or eval job: its config, lifecycle state, progress, latest metrics and logs."""

    __tablename__ = "api_jobs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(16), index=True, default=JobState.QUEUED)  # a JobState
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    logs: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float, default=time.time)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: the server (its sandbox manager's lease name) that runs it; another replica takes it over
    #: only once that server's lease has lapsed
    runner: Mapped[str] = mapped_column(String(128), default="", server_default="")
    #: a cancel asked at another replica than the runner (the runner looks for it while the job runs)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa.false())


class NodeRecord(Base):
    """A standalone node agent of the deployment, shared by every control-plane replica on the database.

    ``heartbeat_at`` is wall-clock time of its last registration (replicas compare it with their own
    clocks, so replicas' clocks must agree within a second or two); ``lost`` says why it was declared
    lost ('' while it serves); ``boot`` names the agent's process.
    """

    __tablename__ = "api_nodes"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    endpoint: Mapped[str] = mapped_column(String(300))
    capacity: Mapped[int] = mapped_column(Integer)
    sessions: Mapped[int] = mapped_column(Integer, default=0)
    boot: Mapped[str] = mapped_column(String(64), default="")
    heartbeat_at: Mapped[float] = mapped_column(Float, default=time.time)
    lost: Mapped[str] = mapped_column(Text, default="")


class JobMetricPoint(Base):
    """One metrics report of a job (numbers only), kept so its plots outlive a server restart.

    Bounded per job and in jobs kept per owner (:class:`rockroll.api.server.history.MetricHistory`).
    """

    __tablename__ = "api_job_metrics"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(64), index=True)
    t: Mapped[float] = mapped_column(Float)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class RestartEvent(Base):
    """One sandbox replacement and its reason, as a server's manager logged it (the newest of each owner kept).

    ``manager`` is the sandbox manager's name (a replica's own); ``event["owner"]`` the sandbox's owner when it was
    logged; see :class:`rockroll.api.server.history.RestartLog`.
    """

    __tablename__ = "api_restarts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    manager: Mapped[str] = mapped_column(String(128), index=True)
    t: Mapped[float] = mapped_column(Float)
    event: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
