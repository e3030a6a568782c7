"""Run a shipped config as a user does, shrunk to two steps of two groups of two (one helper for the config tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROCKROLL = str(Path(sys.executable).with_name("rockroll"))


def smoke_run(config: str, tmp_path: Path, name: str, *, eval_episodes: int = 4) -> Path:
    """``rockroll train configs/<config>`` for two steps with its tiny model under ``tmp_path``; the run dir."""
    runs = tmp_path / "runs"
    res = subprocess.run(
        [
            ROCKROLL, "train", str(ROOT / "configs" / config), f"model.path={tmp_path / 'model'}",
            f"logging.run_dir={runs}", f"name={name}", "total_steps=2", "time_budget_s=0",
            "rollout.scheduler.group_size=2", "rollout.scheduler.num_env_groups=2",
            f"rollout.eval_episodes={eval_episodes}", "rollout.eval_every=0",
            "rollout.select_episodes=0", "sft.steps=2", "sft.num_demos=8", "sft.batch_size=4",
            "logging.progress=false",
        ],
        capture_output=True, text=True, timeout=180, env={**os.environ, "TERM": "dumb"}, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return runs / name
