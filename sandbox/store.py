"""Persistence of sandbox records through SQLAlchemy (SQLite file by default, any SQLAlchemy URL).

Opening a store brings its tables up to date with the sandbox layer's Alembic migrations
(:mod:`rockroll.sandbox.db`); a database of an older rockroll is adopted as it is.

Threat model: the database is trusted manager state; it holds no secrets.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import create_engine, delete, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from rockroll.sandbox.db import private_sqlite_file, upgrade_sandbox_tables
from rockroll.sandbox.models import SandboxRecord

__all__ = ["SandboxStore"]


class SandboxStore:
    """Save, list and delete :class:`SandboxRecord` rows of one manager."""

    def __init__(self, url: str, manager: str) -> None:
        parsed = make_url(url)
        private_sqlite_file(url)  # a SQLite file: its folder made, the file 0600
        kwargs: dict[str, Any] = {}
        if parsed.get_backend_name() == "sqlite":
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        self.engine = create_engine(url, **kwargs)
        with self.engine.begin() as conn:
            upgrade_sandbox_tables(conn)
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self.manager = manager
        self._lock = threading.Lock()

    def save(self, record: dict[str, Any], unless: Callable[[], bool] | None = None) -> None:
        """Insert or update one record (keys as in :meth:`ManagedSandbox.to_record`); nothing when
        ``unless()`` is true once the store is ours (a sandbox deleted meanwhile: its delete went first)."""
        with self._lock:
            if unless is None or not unless():
                self._save(record)

    def _save(self, record: dict[str, Any]) -> None:
        with self._session.begin() as s:
            row = s.get(SandboxRecord, record["id"])
            if row is None:
                row = SandboxRecord(id=record["id"], manager=self.manager)
                s.add(row)
            for k, v in record.items():
                if k != "id":
                    setattr(row, k, v)

    def delete(self, sandbox_id: str) -> None:
        with self._lock, self._session.begin() as s:
            s.execute(delete(SandboxRecord).where(SandboxRecord.id == sandbox_id))

    def list(self) -> list[SandboxRecord]:
        with self._lock, Session(self.engine, expire_on_commit=False) as s:
            rows = s.scalars(select(SandboxRecord).where(SandboxRecord.manager == self.manager))
            return list(rows)

    def close(self) -> None:
        self.engine.dispose()
