"""``configs/alfworld_multiturn.yaml`` as a user runs it, shrunk to two steps: the ALFWorld tokenizer is built,
the warm start imitates the searching expert, the run exports both models and its report splits held-out
success by task type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trainer.config_smoke import smoke_run

pytest.importorskip("torch")


@pytest.mark.slow
def test_alfworld_config_smoke_run(tmp_path: Path) -> None:
    run = smoke_run("alfworld_multiturn.yaml", tmp_path, "alf", eval_episodes=12)
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
