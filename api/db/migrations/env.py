"""Alembic environment of the control plane's tables: runs on the connection handed over by :meth:`rockroll.api.db.Database.migrate`."""

from __future__ import annotations

from alembic import context

from rockroll.api.db.engine import VERSION_TABLE
from rockroll.api.db.models import owns_api_table
from rockroll.sandbox.db import run_env

run_env(context, version_table=VERSION_TABLE, owns=owns_api_table)
