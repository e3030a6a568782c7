"""The control plane on a real PostgreSQL (``ROCKROLL_TEST_PG_URL``, set by scripts/test.sh).

Each test run gets its own database, created and dropped here.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
from rockroll.client.sdk import Client

PG_URL = os.environ.get("ROCKROLL_TEST_PG_URL", "")
pytestmark = pytest.mark.skipif(not PG_URL, reason="set ROCKROLL_TEST_PG_URL (scripts/setup-ci-services.sh)")


@pytest.fixture()
def pg_url() -> Iterator[str]:
    name = f"rr_test_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.engine.make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    yield url
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.mark.slow
def test_server_on_postgres_keeps_envs_and_jobs_across_restart(pg_url: str) -> None:
    from tests.api.test_server import CUSTOM_SOURCE

    d = scratch_dir("pg")
    srv = ServerProc(d, db_url=pg_url)
    token = create_token(pg_url, "gina")
    try:
        srv.start()
        with Client(srv.url, token) as c:
            c.register_env(
                "PgCounter-v0",
                kind="source",
                entry_point="pg_counter:Counter",
                source=CUSTOM_SOURCE.encode(),
                source_name="pg_counter.py",
                tags=["pg"],
            )
            job = c.create_job("eval", {"env": "gina/PgCounter-v0", "episodes": 2})
            assert c.wait_job(job["id"], timeout_s=60)["state"] == "succeeded"
        srv.stop()
        srv.start()
        with Client(srv.url, token) as c:
            assert c.get_env("gina/PgCounter-v0")["tags"] == ["pg"]
            done = c.get_job(job["id"])
            assert done["state"] == "succeeded" and done["metrics"]["eval/gina/PgCounter-v0/success"] == 1.0
            assert "episode 1" in c.job_logs(job["id"])
        tables = set(sa.inspect(sa.create_engine(pg_url)).get_table_names())
        assert {"api_tokens", "api_envs", "api_jobs", "api_alembic_version"} <= tables
    finally:
        srv.cleanup()
