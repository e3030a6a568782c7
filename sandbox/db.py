"""How rockroll's tables are created and migrated: one declarative base, Alembic for every table.

Every table derives from :class:`rockroll.sandbox.models.Base`: the sandbox layer is the lowest one
that owns tables, and the control plane's models (:mod:`rockroll.api.db.models`) use the same base.
Each layer that owns tables ships the migrations of *its* tables, with a version table of its own:

* ``sandbox/migrations`` (version table ``sandbox_alembic_version``): the manager's sandbox
  records. :class:`~rockroll.sandbox.store.SandboxStore` runs them when it opens a database, so a
  standalone manager (``sandboxes.db`` in the user data directory by default) is migrated too;
* ``api/db/migrations`` (``api_alembic_version``): tokens, envs, owners, sessions and jobs.
  :meth:`rockroll.api.db.Database.migrate` runs the sandbox history first, then its own, on the
  one database the control plane and its sandbox manager share.

So the sandbox layer never needs the API's code, and neither history touches the other's tables
(:func:`run_env` hides them from autogenerate). A database written by older rockroll, whose
``sandboxes`` table was made with ``create_all``, is adopted by the first sandbox migration.

To change a table: edit the model, then add a file under the owning layer's ``migrations/versions``
whose ``down_revision`` is the newest one (``tests/sandbox/test_db.py`` fails while the migrated
schema differs from the models). Threat model: as :mod:`rockroll.sandbox.store` (trusted state).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from sqlalchemy import create_engine, make_url
from sqlalchemy.engine import Connection, CursorResult

from rockroll.sandbox.models import SANDBOX_TABLES, Base

__all__ = [
    "rowcount",
    "SANDBOX_MIGRATIONS",
    "SANDBOX_VERSION_TABLE",
    "upgrade",
    "upgrade_sandbox_tables",
    "run_env",
    "owns_sandbox_table",
    "private_sqlite_file",
]

SANDBOX_MIGRATIONS = Path(__file__).parent / "migrations"
SANDBOX_VERSION_TABLE = "sandbox_alembic_version"


def upgrade(connection: Connection, script_location: Path, version_table: str, revision: str = "head") -> None:
    """Bring the tables of one migration history up to ``revision`` on ``connection``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(script_location))
    cfg.attributes["connection"] = connection
    cfg.attributes["version_table"] = version_table
    command.upgrade(cfg, revision)


def upgrade_sandbox_tables(connection: Connection) -> None:
    """Bring the sandbox layer's tables up to date (what :class:`SandboxStore` does on open)."""
    upgrade(connection, SANDBOX_MIGRATIONS, SANDBOX_VERSION_TABLE)


def run_env(context: EnvironmentContext, *, version_table: str, owns: Callable[[str], bool]) -> None:
    """The body of each migration history's ``env.py``.

    Runs on the connection :func:`upgrade` hands over (or, from the ``alembic`` command line, on
    ``sqlalchemy.url``). ``owns(table_name)`` says which tables belong to this history; the others
    share :class:`Base` and the database but are invisible to its autogenerate.
    """
    config = context.config
    version_table = config.attributes.get("version_table", version_table)

    def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        table = obj.name if type_ == "table" else getattr(getattr(obj, "table", None), "name", None)
        return table is None or owns(table)

    def run(connection: Connection) -> None:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            version_table=version_table,
            include_object=include_object,
        )
        with context.begin_transaction():
            context.run_migrations()

    connection = config.attributes.get("connection")
    if connection is not None:
        run(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")  # pragma: no cover - CLI only
    try:  # pragma: no cover
        with engine.begin() as conn:
            run(conn)
    finally:  # pragma: no cover
        engine.dispose()


def private_sqlite_file(url: str) -> None:
    """Make a SQLite database file (and its -wal, -shm and -journal files) readable by its owner only (0600).

    It holds token hashes, every owner's sessions and jobs: no other local user may read it. A new file is
    created 0600 before SQLite opens it (SQLite gives its WAL and shared-memory files the database's mode);
    an existing one is tightened. Other databases, in-memory ones and files of another user are left as
    they are.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    path = os.path.abspath(parsed.database)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    for name in (path, path + "-wal", path + "-shm", path + "-journal"):
        try:
            os.chmod(name, 0o600)
        except (FileNotFoundError, PermissionError):  # none, or another user's: theirs to tighten
            continue


def owns_sandbox_table(name: str) -> bool:
    """Whether ``name`` is one of the sandbox layer's tables."""
    return name in SANDBOX_TABLES


def rowcount(result: object) -> int:
    """The rows an UPDATE or DELETE matched: its ``Session.execute`` result is a ``CursorResult`` (SQLAlchemy's
    types say only ``Result``)."""
    if not isinstance(result, CursorResult):
        raise TypeError(f"not the result of an UPDATE or DELETE: {type(result).__name__}")
    return result.rowcount
