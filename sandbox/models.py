"""SQLAlchemy 2.x models of the sandbox manager's persisted state, and rockroll's one declarative base.

:class:`Base` is the base of every rockroll table (the control plane's models derive from it too).
Tables are created and changed only by Alembic migrations (``sandbox/migrations``, run by
:mod:`rockroll.sandbox.db`), never by ``create_all``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import JSON, Boolean, DateTime, Float, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["Base", "SandboxRecord", "ManagerLease", "SANDBOX_TABLES"]


def _now() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base of every rockroll table (sandbox records here, control-plane tables in ``api/db``)."""


class SandboxRecord(Base):
    """One sandbox a manager owns; survives manager restarts for reconciliation."""

    __tablename__ = "sandboxes"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    manager: Mapped[str] = mapped_column(String(64), index=True)
    backend: Mapped[str] = mapped_column(String(16))
    spec: Mapped[dict] = mapped_column(JSON)
    pool: Mapped[str] = mapped_column(String(64), default="")
    state: Mapped[str] = mapped_column(String(16))
    socket_path: Mapped[str] = mapped_column(String(255), default="")
    ref: Mapped[str] = mapped_column(String(128), default="")
    host: Mapped[str] = mapped_column(String(255), default="")
    generation: Mapped[int] = mapped_column(Integer, default=0)
    boot_id: Mapped[str] = mapped_column(String(32), default="")
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    leased: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now, onupdate=_now)


class ManagerLease(Base):
    """Who runs the manager of one name now (:mod:`rockroll.sandbox.lease`): one row per running manager."""

    __tablename__ = "sandbox_manager_leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(64))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[float] = mapped_column(Float)
    heartbeat_at: Mapped[float] = mapped_column(Float)


#: the tables of the sandbox layer's migration history (``sandbox/migrations``)
SANDBOX_TABLES = frozenset({SandboxRecord.__tablename__, ManagerLease.__tablename__})
