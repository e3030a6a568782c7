"""``bench/dataplane/hold_bench.py`` at a tiny size: sessions held open at a standalone agent are stepped, with no errors."""

from __future__ import annotations

import pytest

from bench.dataplane.hold_bench import hold, render

pytestmark = pytest.mark.slow


def test_eight_sessions_held_for_five_seconds_are_stepped_without_errors_and_cleaned_up() -> None:
    r = hold(8, 5.0, rate=4.0, sample_s=2.0, step_timeout_s=10.0, log=lambda _line: None)
    assert r["errors"] == 0 and r["error_examples"] == [] and r["reconnects"] == 0
    assert r["sockets_peak"] == 8  # every session's socket was open at once
    assert r["steps"] >= 8 * 5  # ~4 steps/s each for 5 s; far fewer would mean the players stalled
    assert r["p50_ms"] > 0 and r["p99_ms"] >= r["p50_ms"]
    assert sum(m["steps"] for m in r["minutes"]) == r["steps"]
    # memory was sampled on the period (0, 2, 4 s) with every socket open, for all three parts, and after the run
    assert [round(s["t_s"]) for s in r["samples"]] == [0, 2, 4]
    for s in r["samples"] + [r["after_run"]]:
        assert s["cp_rss_mb"] > 0 and s["agent_rss_mb"] > 0 and s["sandboxes_rss_mb"] > 0
    assert all(s["sockets_open"] == 8 for s in r["samples"]) and r["after_run"]["sockets_open"] == 0
    assert set(r["rss_drift"]) == {"cp_rss_mb", "agent_rss_mb", "sandboxes_rss_mb"}
    # the sessions closed through the control plane, and the agent took its sandboxes with it
    assert r["close_failures"] == 0 and r["sandbox_procs_left"] == 0
    assert "errors 0" in render(r)
