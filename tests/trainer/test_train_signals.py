"""``rockroll train`` on process sandboxes leaves none behind: after SIGTERM or Ctrl-C its sandboxes are
stopped, and after SIGKILL the next start of the run (``--resume`` or ``--overwrite``) reaps them."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from rockroll.sandbox.backends import make_backend
from rockroll.trainer.pipeline import sandbox_manager_name

pytest.importorskip("torch")

ROCKROLL = [sys.executable, "-m", "rockroll.cli", "train"]


def _running(manager: str) -> list[str]:
    return [h.sandbox_id for h in make_backend("process").list_managed(manager)]


def _start(tiny_model_dir: Path, run_dir: Path, name: str, *flags: str) -> subprocess.Popen[str]:
    args = [
        f"name={name}", f"model.path={tiny_model_dir}", f"logging.run_dir={run_dir}", "logging.progress=false",
        "rollout.sandbox=process", "rollout.mode=multiturn", "rollout.episode.max_turns=3",
        "rollout.scheduler.group_size=2",
        "rollout.scheduler.num_env_groups=2", "rollout.eval_episodes=4", "rollout.eval_every=0", "sft.steps=0",
        "total_steps=100000", "checkpoint.every=1",
    ]  # fmt: skip
    return subprocess.Popen(
        ROCKROLL + args + list(flags),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as test_lease._default_sigint
    )


def _wait_for_sandboxes(proc: subprocess.Popen[str], manager: str, run_dir: Path, name: str) -> list[str]:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        live = _running(manager)
        if live and (run_dir / name / "checkpoints").is_dir():  # training is under way, sandboxes in use
            return live
        time.sleep(0.5)
    proc.kill()
    raise AssertionError("no sandbox and checkpoint within 240 s")


def _cleanup(manager: str) -> None:
    backend = make_backend("process")
    for h in backend.list_managed(manager):
        backend.stop(h)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_on_train_leaves_no_sandbox(tiny_model_dir: Path, tmp_path: Path, sig: int) -> None:
    name = f"sig{uuid.uuid4().hex[:6]}"
    manager = sandbox_manager_name(name, tmp_path / name)
    proc = _start(tiny_model_dir, tmp_path, name)
    try:
        assert _wait_for_sandboxes(proc, manager, tmp_path, name)
        proc.send_signal(sig)
        proc.wait(timeout=120)
        assert proc.returncode != 0
        assert _running(manager) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        _cleanup(manager)


@pytest.mark.slow
def test_after_sigkill_the_next_start_of_the_run_reaps_its_sandboxes(tiny_model_dir: Path, tmp_path: Path) -> None:
    name = f"kill{uuid.uuid4().hex[:6]}"
    manager = sandbox_manager_name(name, tmp_path / name)
    proc = _start(tiny_model_dir, tmp_path, name)
    try:
        left = _wait_for_sandboxes(proc, manager, tmp_path, name)
        proc.kill()
        proc.wait(timeout=60)
        assert left  # the run had sandboxes; SIGKILL runs no clean-up, but their lifelines end them
        gone_by = time.monotonic() + 60
        while set(left) & set(_running(manager)):
            assert time.monotonic() < gone_by, f"the killed run's sandboxes are still running: {left}"
            time.sleep(0.2)
        metrics = tmp_path / name / "metrics.jsonl"
        done = len(metrics.read_text().splitlines()) if metrics.exists() else 0
        again = _start(tiny_model_dir, tmp_path, name, "--resume")
        try:
            deadline = time.monotonic() + 240
            while not (metrics.exists() and len(metrics.read_text().splitlines()) > done):  # a step after resuming
                assert again.poll() is None and time.monotonic() < deadline, again.stdout.read() if again.stdout else ""
                time.sleep(0.5)
            again.send_signal(signal.SIGTERM)
            again.wait(timeout=120)
            assert _running(manager) == []  # the orphans were adopted (then stopped with the rest) or reaped
        finally:
            if again.poll() is None:
                again.kill()
    finally:
        if proc.poll() is None:
            proc.kill()
        _cleanup(manager)
