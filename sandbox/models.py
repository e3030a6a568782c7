"""SQLAlchemy 2.x models of the sandbox manager's persisted state (one module, all models).

Tables are created with ``create_all`` for now; Alembic migrations come with the control plane.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import JSON, Boolean, DateTime, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["Base", "SandboxRecord"]


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    """Declarative base of the sandbox tables."""


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
