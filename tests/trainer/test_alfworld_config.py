"""``configs/alfworld_multiturn.yaml`` as a user runs it, shrunk to two steps: the ALFWorld tokenizer is built,
the warm start imitates the searching expert, the run exports both models and its report splits held-out
success by task type."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
ROCKROLL = str(Path(sys.executable).with_name("rockroll"))


@pytest.mark.slow
def test_alfworld_config_smoke_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    res = subprocess.run(
        [
            ROCKROLL, "train", str(ROOT / "configs" / "alfworld_multiturn.yaml"), f"model.path={tmp_path / 'model'}",
            f"logging.run_dir={runs}", "name=alf", "total_steps=2", "time_budget_s=0", "rollout.group_size=2",
            "rollout.groups_per_step=2", "rollout.eval_episodes=12", "rollout.eval_every=0",
            "rollout.select_episodes=0", "sft.steps=2", "sft.num_demos=8", "sft.batch_size=4",
            "logging.progress=false",
        ],
        capture_output=True, text=True, timeout=180, env={**os.environ, "TERM": "dumb"}, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    run = runs / "alf"
    settings = json.loads((run / "export" / "final" / "rockroll_episode.json").read_text())
    assert settings["history"] == "full" and settings["envs"][0]["expert"] == "rockroll.envs.alfworld.searcher:expert"
    assert (run / "export" / "warmstart" / "tokenizer.json").is_file()
    vocab = json.loads((tmp_path / "model" / "tokenizer.json").read_text())["model"]["vocab"]
    assert "Ġcountertop" in vocab  # ALFWorld's words, not the grid envs'
    summary = json.loads((run / "summary.json").read_text())
    kinds = {k.split("success_cat_")[1] for k in summary["eval_end"] if "/success_cat_" in k}
    assert kinds and kinds <= {"pick", "look", "clean", "heat", "cool", "pick_two"}
    report = (run / "report.md").read_text()
    assert all(f"| {k} |" in report for k in kinds)
