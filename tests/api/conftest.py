"""Fixtures of the control-plane tests: an in-process app (TestClient) and a real server process."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rockroll.api.server.app import create_app
from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
from rockroll.api.server.settings import Settings


@pytest.fixture()
def data_dir() -> Iterator[Path]:
    d = scratch_dir("app")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def readable_by_jobs(path: Path) -> Path:
    """``path`` and everything under it made readable by all: job workers run as an unprivileged user when
    the server is root, and ``save_pretrained`` writes weights 0600 (an operator shares models the same way)."""
    for p in [path, *path.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | (0o555 if p.is_dir() else 0o444))
    return path


def make_settings(data_dir: Path, **overrides: object) -> Settings:
    fields: dict = {
        "database_url": f"sqlite:///{data_dir}/rockroll.db",
        "sandbox_state_dir": str(data_dir / "sb"),
        "backend": "process",
        "pool_size": 0,
        "max_sandboxes": 4,
        "dev_hosts": ["localhost", "127.0.0.1", "::1", "testserver"],  # TestClient's Host (a dev app checks it)
        # a test's server stops its sandboxes when it ends: handed over instead (the product's default) they
        # outlive the test with nobody to adopt them; the restart tests ask for the handover themselves
        "stop_sandboxes_on_exit": True,
    }
    fields.update(overrides)
    return Settings(**fields)


@pytest.fixture()
def dev_client(data_dir: Path) -> Iterator[TestClient]:
    """The app in dev mode (no tokens), real SQLite, process sandboxes."""
    with TestClient(create_app(make_settings(data_dir, dev_mode=True))) as c:
        yield c
        for sb in c.app.state.rr.placement.list():
            c.app.state.rr.placement.delete(sb.id)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProc]:
    """A real ``rockroll serve`` (process backend) with tokens ``alice``, ``bob`` and ``root`` (admin)."""
    d = scratch_dir("srv")
    proc = ServerProc(d)
    proc.tokens = {  # type: ignore[attr-defined]
        "alice": create_token(proc.db_url, "alice"),
        "bob": create_token(proc.db_url, "bob"),
        "root": create_token(proc.db_url, "root", admin=True),
    }
    proc.start()
    yield proc
    proc.cleanup()
