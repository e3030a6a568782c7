"""Engine and session factory; applies the Alembic migrations of every table (see :mod:`rockroll.sandbox.db`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from rockroll.sandbox.db import private_sqlite_file, upgrade, upgrade_sandbox_tables

__all__ = ["Database", "MIGRATIONS_DIR", "VERSION_TABLE"]

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
#: a version table of our own: the sandbox layer runs its migrations in the same database
VERSION_TABLE = "api_alembic_version"


class Database:
    """One engine plus a session factory (a SQLite file is made readable by its owner only)."""

    def __init__(self, url: str) -> None:
        self.url = url
        kwargs: dict = {}
        if url.startswith("sqlite"):
            private_sqlite_file(url)  # 0600: token hashes and every owner's records
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            if url in ("sqlite://", "sqlite:///:memory:"):
                kwargs["poolclass"] = StaticPool
        else:
            kwargs["pool_pre_ping"] = True
        self.engine: Engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    def migrate(self) -> None:
        """Bring every table to the newest Alembic revision: the sandbox layer's, then the control plane's."""
        with self.engine.begin() as conn:
            upgrade_sandbox_tables(conn)
            upgrade(conn, MIGRATIONS_DIR, VERSION_TABLE)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: committed on success, rolled back on error."""
        with self.sessions() as s:
            try:
                yield s
                s.commit()
            except BaseException:
                s.rollback()
                raise

    def checkpoint(self) -> None:
        """SQLite: copy the WAL into the database and truncate it (a no-op on other databases)."""
        if self.url.startswith("sqlite"):
            with self.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        """Dispose of the engine."""
        self.engine.dispose()


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001 - DB-API objects
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA journal_size_limit=16777216")  # a checkpointed WAL shrinks back to 16 MiB at most
    cur.close()
