"""bench/training/mixed_run.py: its runs' configs, its sandbox killer (against real process sandboxes), its noise test."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.training.mixed_run import SandboxKiller, run_config, within_noise
from rockroll.sandbox.managed import SandboxState
from rockroll.sandbox.manager import SandboxManager
from tests.trainer.config_smoke import ROOT, smoke_run


def _args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(
        warmstart="runs/tiny-model", steps=5, eval_every=5, eval_episodes=10, run_dir=str(tmp_path)
    )


def test_single_env_runs_keep_the_mixed_runs_budget(tmp_path: Path) -> None:
    mixed = run_config("mixed", _args(tmp_path))
    assert [e.tag for e in mixed.rollout.envs] == ["frozenlake", "sokoban"]
    for tag in ("frozenlake", "sokoban"):
        single = run_config(tag, _args(tmp_path))
        assert [e.tag for e in single.rollout.envs] == [tag]
        assert (
            single.rollout.scheduler.num_env_groups == mixed.rollout.scheduler.num_env_groups
        )  # same episodes per step
        assert single.total_steps == mixed.total_steps == 5
        assert single.sft.steps == 0 and single.model.path == "runs/tiny-model"  # one shared warm start
        assert single.algo == mixed.algo and single.optim == mixed.optim


def test_killer_kills_process_sandboxes_and_the_manager_replaces_them(tmp_path: Path) -> None:
    state = tempfile.mkdtemp(prefix="rrk-", dir="/tmp")  # short: a Unix socket path holds 107 bytes
    manager = SandboxManager(
        backend="process", name=f"killtest{time.monotonic_ns() % 10**6}", state_dir=state,
        db_url=f"sqlite:///{tmp_path}/sb.db", monitor_interval_s=0.2,
    )  # fmt: skip
    try:
        sandboxes = [manager.create() for _ in range(2)]
        generations = {sb.id: sb.generation for sb in sandboxes}
        killer = SandboxKiller(manager, fraction=1.0, wave_s=0.2)
        killer.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len({k["sandbox"] for k in killer.kills}) < 2:
            time.sleep(0.1)
        killer.stop.set()
        killer.join(5)
        assert {k["sandbox"] for k in killer.kills} == set(generations)
        assert killer.exposures >= 2
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
            sb.generation > generations[sb.id] and sb.state == SandboxState.READY for sb in sandboxes
        ):
            time.sleep(0.1)
        assert all(sb.generation > generations[sb.id] for sb in sandboxes)  # restarted after the kill
        assert all(sb.state == SandboxState.READY for sb in sandboxes)
    finally:
        manager.close()
        shutil.rmtree(state, ignore_errors=True)


def test_killer_stops_after_its_kill_budget() -> None:
    victims = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(3)]
    ready = [
        SimpleNamespace(id=f"sb{i}", state=SandboxState.READY, handle=SimpleNamespace(ref=str(p.pid)))
        for i, p in enumerate(victims)
    ]
    killer = SandboxKiller(SimpleNamespace(list=lambda: ready), fraction=1.0, wave_s=0.05, max_kills=2)
    try:
        killer.start()
        killer.join(20)
        assert not killer.is_alive()  # it ended by itself once its budget was spent
        assert len(killer.kills) == 2
        assert sum(p.wait(10) is not None for p in victims[:2]) == 2 and victims[2].poll() is None
    finally:
        killer.stop.set()
        for p in victims:
            p.kill()
            p.wait(10)


def test_within_noise_uses_binomial_standard_errors() -> None:
    assert within_noise(0.50, 0.55, 200)  # 0.05 < 2 x 0.05
    assert not within_noise(0.50, 0.65, 200)
    assert within_noise(0.0, 0.0, 200)
    assert not within_noise(0.0, 0.05, 200)


@pytest.mark.slow
def test_mixed_bench_runs_end_to_end_with_sandboxes_killed(tmp_path: Path) -> None:
    """The shipped mixed config's warm start, then the bench's mixed, faulted and single-env runs (two steps each)."""
    warm = smoke_run("mixed_frozenlake_sokoban.yaml", tmp_path, "mix") / "export" / "warmstart"
    out = tmp_path / "mixed.json"
    bench = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "training" / "mixed_run.py"), "--warmstart", str(warm), "--steps", "2",
         "--eval-every", "1", "--eval-episodes", "4", "--runs", "mixed,faulted,sokoban", "--parallel", "1",
         "--wave-s", "0.25", "--kill-fraction", "0.5", "--max-kills", "6", "--run-dir", str(tmp_path / "bench"),
         "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "TERM": "dumb"},
        start_new_session=True,  # the bench and its runs: one process group, ended together below
    )  # fmt: skip
    try:
        output, _ = bench.communicate(timeout=480)  # inside the suite's 600 s per test: a bound, not a speed check
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)  # a bench cut off by the bound leaves no run behind
    assert bench.returncode == 0, output[-4000:]
    data = json.loads(out.read_text())
    assert set(data["runs"]) == {"mixed", "faulted", "sokoban"}
    assert set(data["runs"]["mixed"]["curves"]) == {"frozenlake", "sokoban"}
    assert set(data["runs"]["sokoban"]["curves"]) == {"sokoban"}
    assert all(len(pts) == 2 for pts in data["runs"]["mixed"]["curves"].values())  # an evaluation every step
    assert set(data["mixed_vs_single"]) == {"sokoban"}
    assert 1 <= data["faults"]["kills"] <= 6  # sandboxes died under the run, and it still finished and reported
    assert data["runs"]["faulted"]["steps"] == 2
