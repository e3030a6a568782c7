"""Alembic environment of the sandbox layer's tables (run by :func:`rockroll.sandbox.db.upgrade`)."""

from __future__ import annotations

from alembic import context

from rockroll.sandbox.db import SANDBOX_VERSION_TABLE, owns_sandbox_table, run_env

run_env(context, version_table=SANDBOX_VERSION_TABLE, owns=owns_sandbox_table)
