"""One declarative base, every table under Alembic, and an older control-plane database still opens."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from rockroll.api.db import Database
from rockroll.api.db import models as api_models
from rockroll.api.db.engine import MIGRATIONS_DIR, VERSION_TABLE
from rockroll.api.server.auth import create_token, lookup_token
from rockroll.sandbox import models as sandbox_models
from rockroll.sandbox.db import SANDBOX_VERSION_TABLE, owns_sandbox_table, upgrade
from tests.sandbox.test_db import schema_diff, version

PG_URL = os.environ.get("ROCKROLL_TEST_PG_URL", "")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: Any, tmp_path: Any) -> Iterator[str]:
    """A fresh, empty database (PostgreSQL only where ``ROCKROLL_TEST_PG_URL`` is set)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/rr.db"
        return
    if not PG_URL:
        pytest.skip("set ROCKROLL_TEST_PG_URL (scripts/setup-ci-services.sh)")
    name = f"rr_test_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    yield sa.engine.make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def test_one_declarative_base() -> None:
    assert api_models.Base is sandbox_models.Base
    assert api_models.JobRecord.metadata is sandbox_models.SandboxRecord.metadata


def _head() -> str:
    """The one head of the control plane's migrations (several would be a forked chain)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    heads = ScriptDirectory.from_config(config).get_heads()
    assert len(heads) == 1, f"the migrations fork: heads {heads}"
    return heads[0]


def test_every_table_is_in_exactly_one_migration_history(db_url: str) -> None:
    db = Database(db_url)
    db.migrate()
    db.migrate()
    tables = set(sandbox_models.Base.metadata.tables)
    assert all(api_models.owns_api_table(t) != owns_sandbox_table(t) for t in tables)
    assert schema_diff(db.engine, lambda t: t in tables) == []  # the migrations make exactly the models
    assert version(db.engine, VERSION_TABLE) == [_head()]  # one chain, migrated to its end
    assert version(db.engine, SANDBOX_VERSION_TABLE) == ["s0002"]
    db.close()


def test_database_of_an_older_control_plane_upgrades(tmp_path: Any) -> None:
    """Before: api tables by Alembic, ``sandboxes`` by the manager's ``create_all``, no sandbox history."""
    db = Database(f"sqlite:///{tmp_path}/old.db")
    with db.engine.begin() as conn:
        upgrade(conn, MIGRATIONS_DIR, VERSION_TABLE)
    sandbox_models.Base.metadata.create_all(db.engine, tables=[sandbox_models.SandboxRecord.__table__])
    token = create_token(db, "olga")
    db.migrate()
    assert version(db.engine, SANDBOX_VERSION_TABLE) == ["s0002"]
    assert lookup_token(db, token) is not None
    db.close()
