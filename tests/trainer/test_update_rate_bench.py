"""The update-rate bench's arithmetic (the bench itself trains; it is run by hand, not in CI)."""

from __future__ import annotations

from bench.training.update_rate import TARGET_PER_10_MIN, summarize


def test_updates_per_minute_and_the_median_split() -> None:
    rows = [{"time/step": 9.0, "time/rollout": 8.0, "rollout/turns_per_episode": 4.0}]  # start-up, skipped
    rows += [{"time/step": 0.5, "time/rollout": 0.4, "rollout/turns_per_episode": 6.0} for _ in range(119)]
    rows[60]["time/validate"] = 0.8
    out = summarize(rows, rl_time_s=60.0, skip=1)
    assert out["updates_per_min"] == 120.0 and out["updates_in_10_min"] == 1200
    assert out["target_in_10_min"] == TARGET_PER_10_MIN == 3000
    assert out["split"]["time/step"] == {"median_s": 0.5, "count": 119}
    assert out["split"]["time/validate"] == {"median_s": 0.8, "count": 1}
    assert out["turns_per_episode"] == 6.0 and "time/eval" not in out["split"]
