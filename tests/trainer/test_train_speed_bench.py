"""bench/training/train_speed.py end to end, shrunk: a sync and an async run on the slowed Sokoban in process sandboxes,
checkpoints every few seconds of training, each checkpoint evaluated, the speed-up line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.training.train_speed import race, time_to
from tests.trainer.config_smoke import ROOT, smoke_run

pytest.importorskip("torch")


def test_time_to_is_the_first_checkpoint_reaching_the_target() -> None:
    pts = [{"seconds": 10.0, "success": 0.1}, {"seconds": 20.0, "success": 0.3}, {"seconds": 30.0, "success": 0.2}]
    assert time_to(pts, 0.25) == 20.0
    assert time_to(pts, 0.1) == 10.0
    assert time_to(pts, 0.5) is None


def test_race_times_both_runs_to_the_sync_runs_final_success() -> None:
    def pts(*xs: tuple[float, float]) -> list[dict[str, float]]:
        return [{"seconds": 0.0, "success": 0.1}] + [{"seconds": t, "success": v} for t, v in xs]

    sync = pts((100, 0.2), (200, 0.25), (300, 0.22), (400, 0.25))
    r = race({"sync": sync, "async": pts((50, 0.15), (100, 0.26))}, warm=0.1)
    assert r["target"] == 0.25 and r["sync_s_to_target"] == 200 and r["async_s_to_target"] == 100
    assert r["speedup"] == 2.0 and r["speedup_to_end"] == 4.0
    assert r["speedup_50pct_gain"] == 1.0  # 0.175: sync at 100 s, async at 100 s
    assert race({"sync": sync, "async": pts((100, 0.2))}, warm=0.1)["speedup"] is None  # never reached
    flat = pts((100, 0.1))
    assert race({"sync": flat, "async": pts((10, 0.3))}, warm=0.1)["speedup"] is None  # sync never improved


@pytest.mark.slow
def test_train_speed_bench_races_sync_against_async(tmp_path: Path) -> None:
    warm = smoke_run("sokoban_multiturn.yaml", tmp_path, "sok") / "export" / "warmstart"
    out = tmp_path / "speed.json"
    res = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "training" / "train_speed.py"), "--warmstart", str(warm), "--minutes", "0.3",
         "--ckpt-every-s", "5", "--episodes", "4", "--groups", "2", "--median-s", "0.02", "--run-dir",
         str(tmp_path / "bench"), "--json", str(out), "--plot", str(tmp_path / "speed.png")],
        capture_output=True, text=True, timeout=600, env={**os.environ, "TERM": "dumb"}, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1].startswith("speedup: ")
    data = json.loads(out.read_text())
    assert data["latency"]["kind"] == "lognormal"
    for mode in ("sync", "async"):
        curve = data[mode]["curve"]
        assert curve[0]["step"] == -1 and len(curve) >= 3  # the warm start, then checkpoints every 5 s and the last
        assert [p["seconds"] for p in curve] == sorted(p["seconds"] for p in curve)
        assert data[mode]["steps"] >= 2
    assert (tmp_path / "speed.png").stat().st_size > 0
