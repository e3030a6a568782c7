"""bench/rollout/adaptive_timeouts.py shrunk: one task, a few submissions through a process sandbox; the
adaptive rule cuts the slow wrong run short, and a slow correct answer cut off is counted as such."""

from __future__ import annotations

import pytest

from bench.rollout.adaptive_timeouts import Submission, compare, render, workload


def test_workload_interleaves_tasks_and_keeps_the_counts() -> None:
    subs = workload(["a", "b"], {"correct": 2, "slow_wrong": 1}, seed=1)
    assert [s.task_id for s in subs] == ["a", "b"] * 3
    assert sorted(s.kind for s in subs if s.task_id == "a") == ["correct", "correct", "slow_wrong"]
    assert {s.seed for s in subs if s.task_id == "b"} == {1}


@pytest.mark.slow
def test_compare_cuts_slow_runs_and_counts_correct_answers_cut_off() -> None:
    kinds = ["correct", "slow_wrong", "slow_correct", "wrong"]
    subs = [Submission("roman-00", 0, k) for k in kinds]
    # limits wide enough that a fast run fits its limit on a loaded machine (an answer's tests take ~0.3 s idle)
    result = compare(subs, t_min_s=1.5, lam=2.0, t_max_s=6.0, slow_correct_s=3.0)
    fixed, adaptive = result["modes"]["fixed"], result["modes"]["adaptive"]
    assert fixed["correct_scored"] == 2 and fixed["timed_out"] == 1 and fixed["cut_off"] == 0
    assert adaptive["correct_scored"] == 1 and adaptive["cut_off"] == 2 and adaptive["correct_cut_off"] == 1
    assert [r["limit_s"] for r in result["runs"]["adaptive"]] == [6.0, 1.5, 1.5, 1.5]
    assert result["saved_s"] > 3.0 and result["estimated_saved_s"] == 9.0
    assert fixed["test_run_s"] > 8.5 > adaptive["test_run_s"]
    assert "| adaptive |" in render(result)
