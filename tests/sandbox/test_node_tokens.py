"""Session tokens and step numbering of the node agent, as units (no processes)."""

from __future__ import annotations

import secrets
import threading
import time
from types import SimpleNamespace

import pytest

import rockroll.sandbox.node.tokens as token_module
from rockroll.sandbox.node.sequence import REPLAY_WINDOW, SequenceError, StepLog
from rockroll.sandbox.node.tokens import SessionTokens, TokenExpired, TokenInvalid

SECRET = secrets.token_urlsafe(32)


def test_a_token_binds_session_owner_node_and_expiry() -> None:
    tokens = SessionTokens(SECRET, ttl_s=60)
    token, expires_at = tokens.issue("se-1", "alice", "n1")
    claims = tokens.verify(token)
    assert (claims.session_id, claims.owner, claims.node_id) == ("se-1", "alice", "n1")
    assert claims.expires_at == pytest.approx(expires_at) and expires_at > time.time() + 50


def test_expired_forged_and_tampered_tokens_are_refused() -> None:
    tokens = SessionTokens(SECRET)
    expired, _ = tokens.issue("se-1", "alice", "n1", ttl_s=-1)
    with pytest.raises(TokenExpired):
        tokens.verify(expired)
    forged, _ = SessionTokens(secrets.token_urlsafe(32)).issue("se-1", "alice", "n1")
    with pytest.raises(TokenInvalid):
        tokens.verify(forged)
    good, _ = tokens.issue("se-1", "alice", "n1")
    header, payload, sig = good.split(".")
    other_payload = tokens.issue("se-2", "alice", "n1")[0].split(".")[1]
    with pytest.raises(TokenInvalid):
        tokens.verify(f"{header}.{other_payload}.{sig}")  # another session's claims under this signature
    for bad in ("", "x", "a.b.c", "x" * 5000):
        with pytest.raises(TokenInvalid):
            tokens.verify(bad)


def test_a_remembered_token_still_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = SessionTokens(SECRET)
    token, expires_at = tokens.issue("se-1", "alice", "n1", ttl_s=5)
    assert expires_at == int(expires_at)  # a JWT's exp is whole seconds: what the client is told is what holds
    tokens.verify(token)  # verified once: remembered
    monkeypatch.setattr(token_module, "time", SimpleNamespace(time=lambda: expires_at + 1))  # past its exp
    with pytest.raises(TokenExpired):
        tokens.verify(token)


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 32"):
        SessionTokens("short")


def test_steps_are_numbered_replayed_and_gaps_refused() -> None:
    log = StepLog("se-1")
    calls: list[int] = []

    def step() -> dict:
        calls.append(1)
        return {"n": len(calls)}

    assert log.run(None, step) == ({"n": 1}, False)
    assert log.run(2, step) == ({"n": 2}, False)
    assert log.run(2, step) == ({"n": 2}, True) and len(calls) == 2  # replayed, not stepped
    with pytest.raises(SequenceError) as e:
        log.run(5, step)
    assert (e.value.got, e.value.expected) == (5, 3) and len(calls) == 2
    for _ in range(REPLAY_WINDOW):
        log.run(None, step)
    with pytest.raises(SequenceError, match="older than"):
        log.run(1, step)
    with pytest.raises(SequenceError):
        log.run(True, step)  # type: ignore[arg-type]


def test_a_failed_step_is_recorded_and_its_replay_raises_without_stepping() -> None:
    log = StepLog("se-1")
    calls: list[int] = []

    def boom() -> dict:
        calls.append(1)
        raise RuntimeError("env failed")

    with pytest.raises(RuntimeError):
        log.run(1, boom)
    with pytest.raises(RuntimeError):
        log.run(1, boom)
    assert len(calls) == 1 and log.last == 1


def test_a_replay_waits_for_the_step_it_replays() -> None:
    log = StepLog("se-1")
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow() -> str:
        calls.append(1)
        started.set()
        release.wait(5)
        return "done"

    first = threading.Thread(target=lambda: log.run(1, slow))
    first.start()
    started.wait(5)
    out: list = []
    second = threading.Thread(target=lambda: out.append(log.run(1, slow)))
    second.start()
    time.sleep(0.05)
    assert not out  # the replay waits while step 1 runs
    release.set()
    first.join(5)
    second.join(5)
    assert out == [("done", True)] and len(calls) == 1
