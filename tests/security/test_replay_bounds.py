"""Step replay records are bounded in bytes per session and per process; an answer past the bounds is
delivered but not kept, and its replay says so (issue 35, hole B)."""

from __future__ import annotations

import gc

import pytest

from rockroll.sandbox.node.replay import FLOOR_BYTES, ReplayBudget, answer_bytes
from rockroll.sandbox.node.sequence import REPLAY_WINDOW, ReplayNotKept, SequenceError, StepLog
from rockroll.sandbox.node.wire import error_answer

KIB = 1024


def answer(size: int) -> dict:
    return {"observation": "x" * size, "reward": 0.0, "terminated": False, "truncated": False, "info": {}}


def test_an_answer_over_the_session_bound_is_delivered_but_not_kept() -> None:
    budget = ReplayBudget(session_bytes=64 * KIB, total_bytes=1024 * KIB)
    log = StepLog("se-1", budget)
    big = answer(200 * KIB)
    assert log.run(1, lambda: big) == (big, False)  # delivered whole
    assert log.held_bytes == 0 and budget.used == 0
    with pytest.raises(ReplayNotKept) as e:
        log.run(1, lambda: pytest.fail("a replay must not step"))
    assert isinstance(e.value, SequenceError) and (e.value.got, e.value.expected) == (1, 2)
    assert "not kept" in str(e.value)
    wire = error_answer(e.value)
    assert (wire["status"], wire["error"]["code"]) == (409, "replay_not_kept")
    small = answer(10)
    assert log.run(2, lambda: small) == (small, False)
    assert log.run(2, lambda: pytest.fail("replayed")) == (small, True)


def test_a_session_keeps_at_most_its_bytes_older_answers_making_room() -> None:
    budget = ReplayBudget(session_bytes=100 * KIB, total_bytes=1024 * KIB)
    log = StepLog("se-1", budget)
    for n in range(1, REPLAY_WINDOW + 1):
        log.run(n, lambda: answer(30 * KIB))
        assert log.held_bytes <= budget.session_bytes and budget.used == log.held_bytes
    assert log.run(REPLAY_WINDOW, lambda: None)[1] is True  # the latest is kept
    with pytest.raises(ReplayNotKept):
        log.run(REPLAY_WINDOW - 3, lambda: None)  # dropped for room: said so, not run again
    log.run(REPLAY_WINDOW + 1, lambda: answer(10))
    with pytest.raises(SequenceError, match="older than") as e:
        log.run(1, lambda: None)  # out of the window: the count bound still holds
    assert not isinstance(e.value, ReplayNotKept)


def test_the_process_bound_holds_across_sessions_and_bytes_come_back() -> None:
    budget = ReplayBudget(session_bytes=100 * KIB, total_bytes=200 * KIB)
    logs = [StepLog(f"se-{i}", budget) for i in range(6)]
    for n in range(1, 4):
        for log in logs:
            log.run(n, lambda: answer(80 * KIB))
            assert budget.used <= budget.total_bytes
    kept = [log for log in logs if log.held_bytes]
    assert len(kept) == 2  # the others' large answers were delivered, not kept
    with pytest.raises(ReplayNotKept):
        logs[-1].run(3, lambda: None)
    # a small latest answer is kept even when the process's bytes are spent (one owner cannot starve another)
    assert logs[-1].run(4, lambda: answer(100))[1] is False
    assert logs[-1].run(4, lambda: None)[1] is True
    assert budget.used <= budget.total_bytes + len(logs) * FLOOR_BYTES
    del logs, kept, log
    gc.collect()
    assert budget.used == 0  # a session's log that goes gives its bytes back


def test_recorded_errors_are_bounded_too_and_sizes_stop_at_the_cap() -> None:
    budget = ReplayBudget(session_bytes=8 * KIB, total_bytes=64 * KIB)
    log = StepLog("se-1", budget)

    def boom() -> dict:
        raise RuntimeError("e" * (64 * KIB))

    with pytest.raises(RuntimeError):
        log.run(1, boom)
    with pytest.raises(ReplayNotKept):
        log.run(1, boom)
    nested: list = []
    for _ in range(100_000):
        nested = [nested, "y" * 100]
    assert answer_bytes(nested, 10 * KIB) < 20 * KIB  # counting stops past the cap


def test_the_bounds_come_from_the_environment_with_server_side_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKROLL_REPLAY_SESSION_BYTES", str(2 * KIB))
    monkeypatch.setenv("ROCKROLL_REPLAY_TOTAL_BYTES", str(16 * KIB))
    b = ReplayBudget.from_env()
    assert (b.session_bytes, b.total_bytes) == (2 * KIB, 16 * KIB)
    monkeypatch.setenv("ROCKROLL_REPLAY_SESSION_BYTES", str(1 << 40))
    with pytest.raises(ValueError, match="per session"):
        ReplayBudget.from_env()
    monkeypatch.setenv("ROCKROLL_REPLAY_SESSION_BYTES", "lots")
    with pytest.raises(ValueError, match="number of bytes"):
        ReplayBudget.from_env()
    monkeypatch.delenv("ROCKROLL_REPLAY_SESSION_BYTES")
    monkeypatch.setenv("ROCKROLL_REPLAY_TOTAL_BYTES", str(1 << 40))
    with pytest.raises(ValueError, match="per process"):
        ReplayBudget.from_env()
    d = ReplayBudget()
    assert (d.session_bytes, d.total_bytes) == (1024 * KIB, 64 * 1024 * KIB)


def test_one_owner_cannot_take_the_bytes_of_another() -> None:
    budget = ReplayBudget(session_bytes=100 * KIB, total_bytes=400 * KIB, owner_bytes=200 * KIB)
    mallory = [StepLog(f"m-{i}", budget, owner="mallory") for i in range(6)]
    for log in mallory:
        log.run(1, lambda: answer(80 * KIB))
    assert budget.by_owner["mallory"] <= budget.owner_bytes  # 2 of mallory's 6 sessions kept theirs
    assert sum(1 for log in mallory if log.held_bytes) == 2
    alice = StepLog("a-1", budget, owner="alice")
    alice.run(1, lambda: answer(80 * KIB))
    assert alice.held_bytes > 0 and alice.run(1, lambda: None)[1] is True  # alice's answer was kept
    with pytest.raises(ValueError, match="per owner"):
        ReplayBudget(session_bytes=100 * KIB, total_bytes=400 * KIB, owner_bytes=500 * KIB)
    del mallory, alice, log
    gc.collect()
    assert budget.used == 0 and budget.by_owner == {}
