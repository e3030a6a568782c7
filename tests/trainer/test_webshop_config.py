"""``configs/webshop_multiturn.yaml`` as a user runs it, shrunk to two steps: the WebShop tokenizer is built,
the run exports the warm start and the final model with their episode settings, and
``bench/learning/webshop_eval.py`` plays held-out goals with both (success, score, its parts, actions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.config_smoke import ROOT, smoke_run

pytest.importorskip("torch")


@pytest.mark.slow
def test_webshop_config_smoke_run_and_bench(tmp_path: Path) -> None:
    env = {**os.environ, "TERM": "dumb"}
    export = smoke_run("webshop_multiturn.yaml", tmp_path, "ws") / "export"
    settings = json.loads((export / "final" / "rockroll_episode.json").read_text())
    assert settings["history_k"] == 0 and settings["envs"][0]["env_kwargs"]["result_labels"] == "position"
    bench = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "learning" / "webshop_eval.py"), str(export / "warmstart"), str(export / "final"),
         "--episodes", "2"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr[-3000:]
    rows = [line for line in bench.stdout.splitlines() if line.startswith("| ") and "export" in line]
    assert len(rows) == 2 and all(len(r.split("|")) == 14 for r in rows)
