"""SQLAlchemy models of the control plane (tables are prefixed ``api_``).

They derive from rockroll's one declarative base, :class:`rockroll.sandbox.models.Base` (re-exported
here), whose sandbox records live in the same database. Here live what the control plane owns:
tokens, custom env specs, the owner of each sandbox and session, and jobs. Their migrations are in
``api/db/migrations`` (see :mod:`rockroll.sandbox.db`).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import JSON, Boolean, Float, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from rockroll.api.job_state import JobState
from rockroll.sandbox.models import Base

__all__ = ["Base", "TokenRecord", "EnvRecord", "SandboxOwner", "SessionRecord", "JobRecord", "owns_api_table"]


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
