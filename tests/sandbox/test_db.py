"""The sandbox tables come from Alembic migrations (never ``create_all``); older databases still open."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.orm import Session

from rockroll.sandbox.db import SANDBOX_VERSION_TABLE, owns_sandbox_table
from rockroll.sandbox.models import Base, SandboxRecord
from rockroll.sandbox.store import SandboxStore


def schema_diff(engine: sa.Engine, owns: Callable[[str], bool]) -> list[Any]:
    """What autogenerate would change so the database matches the models (of the tables ``owns`` picks)."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        table = obj.name if type_ == "table" else obj.table.name
        return owns(table)

    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": include})
        return compare_metadata(ctx, Base.metadata)


def version(engine: sa.Engine, table: str) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(sa.text(f"SELECT version_num FROM {table}"))]


def test_store_migrates_a_new_database_to_the_models(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/sb.db"
    SandboxStore(url, "m").close()
    store = SandboxStore(url, "m")  # a second open finds it at head
    assert set(sa.inspect(store.engine).get_table_names()) == {
        "sandboxes",
        "sandbox_manager_leases",
        SANDBOX_VERSION_TABLE,
    }
    assert version(store.engine, SANDBOX_VERSION_TABLE) == ["s0002"]
    assert schema_diff(store.engine, owns_sandbox_table) == []
    store.close()


def test_store_adopts_a_table_made_by_create_all(tmp_path: Any) -> None:
    """Older rockroll made ``sandboxes`` with ``create_all`` and no version table: its rows stay."""
    url = f"sqlite:///{tmp_path}/old.db"
    engine = sa.create_engine(url)
    Base.metadata.create_all(engine, tables=[SandboxRecord.__table__])
    with Session(engine) as s, s.begin():
        s.add(
            SandboxRecord(
                id="sb-old",
                manager="m",
                backend="process",
                spec={},
                pool="",
                state="ready",
                socket_path="",
                ref="1",
                host="",
                generation=0,
                boot_id="",
                restarts=0,
                leased=False,
                created_at=datetime.now(UTC),
                updated_at=datetime.now(UTC),
            )
        )
    engine.dispose()
    store = SandboxStore(url, "m")
    assert [r.id for r in store.list()] == ["sb-old"]
    assert version(store.engine, SANDBOX_VERSION_TABLE) == ["s0002"]
    store.close()


def test_manager_database_is_migrated(make_manager: Any) -> None:
    m = make_manager()
    assert version(m.store.engine, SANDBOX_VERSION_TABLE) == ["s0002"]
