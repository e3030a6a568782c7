"""Issue 13, the low items at the API edge.

Attacks: another local user reads the database (token hashes, every owner's records); bob probes
alice's ids to learn that they exist; a web page rebinds its own name to 127.0.0.1 and drives a
token-less dev server from the victim's browser; a revoked token keeps playing over the WebSocket
it opened before. Real ``rockroll serve`` subprocesses, real SQLite, real process sandboxes.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import websockets
from websockets.sync.client import connect

from rockroll.api.db import Database
from rockroll.api.server.auth import list_tokens, revoke_token
from rockroll.api.server.serve_proc import ROCKROLL, ROOT, ServerProc, create_token, scratch_dir
from rockroll.client.sdk import Client
from rockroll.sandbox.store import SandboxStore


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# --------------------------------------------------------------------------- the database file is 0600
def test_server_database_is_private(server: ServerProc) -> None:
    db = Path(server.db_url.removeprefix("sqlite:///"))
    with Client(server.url, server.tokens["alice"]) as c:
        c.list_sandboxes()  # the server has written: its WAL and shared-memory files exist
    files = [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]
    assert db in files and len(files) >= 2
    for p in files:
        assert _mode(p) == 0o600, f"{p.name} is {oct(_mode(p))}"


def test_open_tightens_an_old_database_and_the_sandbox_store(data_dir: Path) -> None:
    old = data_dir / "old.db"
    Database(f"sqlite:///{old}").migrate()
    for p in data_dir.glob("old.db*"):
        os.chmod(p, 0o644)  # as rockroll wrote it before
    db = Database(f"sqlite:///{old}")
    db.migrate()
    assert sorted(p.name for p in data_dir.glob("old.db*") if _mode(p) != 0o600) == []
    db.close()

    old_umask = os.umask(0o022)
    try:
        store = SandboxStore(f"sqlite:///{data_dir / 'standalone' / 'sandboxes.db'}", "m")
        store.engine.dispose()
    finally:
        os.umask(old_umask)
    assert _mode(data_dir / "standalone" / "sandboxes.db") == 0o600


# --------------------------------------------------------------- another owner's id answers as an unknown one
def _answer(http: httpx.Client, method: str, path: str) -> tuple[int, dict]:
    r = http.request(method, path, json={} if method == "POST" else None)
    return r.status_code, r.json()


def test_other_owners_ids_answer_exactly_as_unknown_ones(server: ServerProc) -> None:
    with (
        Client(server.url, server.tokens["alice"]) as alice,
        httpx.Client(base_url=server.url, headers=_bearer(server.tokens["bob"]), timeout=30) as bob,
    ):
        sandbox = alice.create_sandbox(memory_mb=128)["id"]
        session = alice.create_session("FrozenLake-v0")["id"]
        job = alice.create_job("eval", {"env": "FrozenLake-v0", "episodes": 1})["id"]
        try:
            probes = [
                ("GET", "/v1/sandboxes/{}", sandbox),
                ("DELETE", "/v1/sandboxes/{}", sandbox),
                ("POST", "/v1/sandboxes/{}/restart", sandbox),
                ("GET", "/v1/sessions/{}", session),
                ("GET", "/v1/sessions/{}/state", session),
                ("DELETE", "/v1/sessions/{}", session),
                ("GET", "/v1/jobs/{}", job),
                ("GET", "/v1/jobs/{}/logs", job),
                ("POST", "/v1/jobs/{}/cancel", job),
            ]
            for method, template, real in probes:
                fake = real[:-6] + uuid.uuid4().hex[:6]  # same shape, nobody's
                status, body = _answer(bob, method, template.format(real))
                fake_status, fake_body = _answer(bob, method, template.format(fake))
                assert status == fake_status == 404, (method, template, status, body)
                assert str(body).replace(real, "ID") == str(fake_body).replace(fake, "ID"), (body, fake_body)
            # the session's WebSocket: refused the same way for her id and an unknown one
            for sid in (session, session[:-6] + "abcdef"):
                with pytest.raises(websockets.exceptions.InvalidStatus) as info:
                    connect(_ws(server.url, sid), additional_headers=_bearer(server.tokens["bob"]), open_timeout=10)
                assert info.value.response.status_code == 403
            assert alice.get_sandbox(sandbox)["id"] == sandbox  # bob's probes changed nothing
            assert alice.get_session(session)["id"] == session
        finally:
            alice.close_session(session)
            alice.delete_sandbox(sandbox)
            alice.wait_job(job, timeout_s=60)


# ------------------------------------------------------------------ dev mode answers localhost names only
@pytest.fixture(scope="module")
def dev_server() -> Iterator[ServerProc]:
    proc = ServerProc(scratch_dir("dev"), dev=True)
    proc.start()
    yield proc
    proc.cleanup()


def test_dev_server_refuses_rebound_host_names(dev_server: ServerProc) -> None:
    port = dev_server.url.rsplit(":", 1)[1]
    with httpx.Client(base_url=dev_server.url, timeout=10) as http:
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.nip.io:{port}", "localhost.evil.example"):
            r = http.get("/v1/envs", headers={"Host": host})
            assert r.status_code == 400, (host, r.status_code)
            assert r.json()["error"]["code"] == "bad_host"
        for host in ("localhost", f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
            assert http.get("/v1/envs", headers={"Host": host}).status_code == 200, host
    # a WebSocket is refused before its handshake completes (a socket to 127.0.0.1 whose URL names evil.example)
    with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as raw:
        with pytest.raises(websockets.exceptions.InvalidStatus) as info:
            connect(f"ws://evil.example:{port}/v1/sessions/x/ws", sock=raw, open_timeout=10)
    assert info.value.response.status_code == 403


# ------------------------------------------------------------ a revoked token loses its open WebSocket at once
def _ws(url: str, session_id: str) -> str:
    return url.replace("http://", "ws://") + f"/v1/sessions/{session_id}/ws"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _token_id(db_url: str, name: str) -> str:
    db = Database(db_url)
    try:
        return next(t.id for t in list_tokens(db) if t.name == name)
    finally:
        db.close()


def _closed_at(sock, seconds: float) -> tuple[float, int | None]:
    """When the server closed ``sock`` (read meanwhile, for ``seconds`` at most), and the close code."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            sock.recv(timeout=0.05)
        except TimeoutError:
            continue
        except websockets.exceptions.ConnectionClosed as e:
            return time.monotonic(), e.rcvd.code if e.rcvd else None
    return float("inf"), None


@pytest.mark.parametrize("via", ["database", "cli"])
def test_revoked_token_loses_its_websocket_within_a_second(server: ServerProc, via: str) -> None:
    name = f"carol-{via}"
    token = create_token(server.db_url, name)
    with Client(server.url, token) as carol:
        sid = carol.create_session("FrozenLake-v0")["id"]
        with connect(_ws(server.url, sid), additional_headers=_bearer(token), open_timeout=10) as sock:
            sock.send('{"op": "reset", "seed": 1}')
            assert "observation" in sock.recv(timeout=10)
            time.sleep(0.6)  # the token is cached and checked as valid
            if via == "database":
                db = Database(server.db_url)
                revoked_at = time.monotonic()
                assert revoke_token(db, _token_id(server.db_url, name))
                db.close()
            else:
                cmd = [*ROCKROLL, "token", "revoke", _token_id(server.db_url, name), "--db", server.db_url]
                subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=60)
                revoked_at = time.monotonic()
            closed_at, code = _closed_at(sock, 5.0)
        took = closed_at - revoked_at  # from before the revocation's commit (database), or after it (CLI)
        assert code == 4401 and took < 1.0, (code, took)
        assert httpx.get(f"{server.url}/v1/sessions", headers=_bearer(token), timeout=10).status_code == 401
    with Client(server.url, server.tokens["root"]) as root:
        root.close_session(sid)
