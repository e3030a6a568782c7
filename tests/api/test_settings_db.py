"""Settings, migrations and token storage."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from rockroll.api.db import Database
from rockroll.api.server.auth import create_token, hash_token, list_tokens, lookup_token, revoke_token
from rockroll.api.server.settings import Settings, is_loopback
from rockroll.envs.config import ConfigError


def test_defaults() -> None:
    s = Settings()
    assert (s.host, s.port, s.backend) == ("127.0.0.1", 8080, "auto")
    assert s.database_url == "sqlite:///~/.rockroll/rockroll.db"


def test_dev_mode_only_on_loopback() -> None:
    Settings(dev_mode=True, host="127.0.0.1").check()
    Settings(dev_mode=True, host="::1").check()
    with pytest.raises(ValueError, match="loopback"):
        Settings(dev_mode=True, host="0.0.0.0").check()
    assert is_loopback("localhost") and not is_loopback("10.0.0.1") and not is_loopback("example.com")


def test_unknown_setting_rejected() -> None:
    with pytest.raises(ValueError):
        Settings(nonsense=1)  # type: ignore[call-arg]


def test_a_bad_setting_names_its_key_and_what_it_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The config dialect's error, whether the value came from a keyword or from the environment."""
    with pytest.raises(ConfigError, match="backend must be one of auto, docker, process.*did you mean 'docker'") as e:
        Settings(backend="dockr")
    assert (e.value.key, e.value.value) == ("backend", "dockr") and "process" in e.value.allowed
    monkeypatch.setenv("ROCKROLL_PORT", "70000")
    with pytest.raises(ConfigError, match="port must be <= 65535, got '70000'") as e:
        Settings()
    assert (e.value.key, e.value.allowed) == ("port", "<= 65535")


def test_sqlite_path_expanded(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    url = Settings(database_url="sqlite:///~/x/db.sqlite").resolved_database_url()
    assert url == f"sqlite:///{tmp_path}/x/db.sqlite" and (tmp_path / "x").is_dir()


def test_migrations_idempotent_and_tokens_hashed(tmp_path) -> None:
    db = Database(f"sqlite:///{tmp_path}/t.db")
    db.migrate()
    db.migrate()
    tables = set(sa.inspect(db.engine).get_table_names())
    assert {"api_tokens", "api_envs", "api_sessions", "api_jobs", "api_sandboxes", "api_alembic_version"} <= tables
    token = create_token(db, "dana", admin=True)
    with db.engine.connect() as conn:
        stored = [r[0] for r in conn.execute(sa.text("SELECT token_hash FROM api_tokens"))]
    assert stored == [hash_token(token)] and token not in stored[0]
    who = lookup_token(db, token)
    assert who is not None and who.owner == "dana" and who.admin
    assert lookup_token(db, token + "x") is None and lookup_token(db, "garbage") is None
    assert revoke_token(db, list_tokens(db)[0].id)
    assert lookup_token(db, token) is None
    with pytest.raises(ValueError):
        create_token(db, "bad name!")
    db.close()
