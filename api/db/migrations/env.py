"""Alembic environment: runs on the connection handed over by :meth:`rockroll.api.db.Database.migrate`."""

from __future__ import annotations

from alembic import context

from rockroll.api.db.engine import VERSION_TABLE
from rockroll.api.db.models import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reachable from the alembic command line
    from sqlalchemy import create_engine

    connection = create_engine(config.get_main_option("sqlalchemy.url")).connect()

context.configure(connection=connection, target_metadata=Base.metadata, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
