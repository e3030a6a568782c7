"""``rockroll train`` as a user runs it (a subprocess): a run name that exists, --overwrite, --resume
after a crash (same weights as an uninterrupted run), ``k=v`` without a YAML, progress in a log and
on a terminal, and an example in every ``--help``."""

from __future__ import annotations

import itertools
import json
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rockroll.trainer.run import checkpoint as ckpt  # noqa: E402

ROCKROLL = str(Path(sys.executable).with_name("rockroll"))
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "frozenlake_tiny.yaml")
TRACEBACK = "Traceback (most recent call last)"


def _args(model: Path, runs: Path, name: str, steps: int, *extra: str) -> list[str]:
    """A tiny run that finishes in seconds (non-slippery 4x4 maps, 8 episodes a step, weights change every step)."""
    return [
        CONFIG, f"model.path={model}", "model.build_tiny=false", f"logging.run_dir={runs}", f"name={name}",
        f"total_steps={steps}", "time_budget_s=0", "rollout.scheduler.group_size=4",
        "rollout.scheduler.num_env_groups=2", "rollout.episode.max_tokens_per_turn=8", "rollout.eval_episodes=4",
        "rollout.eval_every=0", "algo.dynamic_sampling=false", "algo.kl_coef=0.01", "algo.entropy_coef=0.01",
        "optim.lr=1e-3", "optim.mini_batch_size=4", "optim.micro_batch_size=4",
        "optim.schedule=constant", "sft.steps=2", "sft.num_demos=10", "sft.batch_size=4", "checkpoint.every=1",
        "logging.tensorboard=false", *extra,
    ]  # fmt: skip


def _train(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "TERM": "dumb"}
    return subprocess.run(
        [ROCKROLL, "train", *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def _steps(run: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6, rtol=0) for k in a)


@pytest.mark.slow
def test_existing_run_is_refused_overwritten_and_resumed(tiny_model_dir: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = runs / "r"
    first = _train(*_args(tiny_model_dir, runs, "r", 4, "checkpoint.keep=2"))
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(ckpt.list_checkpoints(run)) == [2, 3]  # pruned to the newest 2 of this run
    assert not list(run.rglob("state.pt")) and (run / "checkpoints" / "step-3" / "model.safetensors").is_file()
    # progress in a log (stdout is a pipe): one plain line per SFT step, evaluation and RL step
    out = first.stdout
    for line in ("sft 1/2  loss", "sft 2/2  loss", "eval before warm start: success", "eval: success"):
        assert line in out, out
    assert [ln.split()[1] for ln in out.splitlines() if ln.startswith("step ")] == ["1/4", "2/4", "3/4", "4/4"]
    assert "pg_loss" in out and "━" not in out

    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    again = _train(*_args(tiny_model_dir, runs, "r", 2))  # the same name again: refused, nothing touched
    assert again.returncode == 2 and TRACEBACK not in again.stderr
    assert again.stderr.splitlines() == [
        f"run 'r' exists ({run})",
        "continue it with --resume, start it over with --overwrite, or pick another name=...",
    ]
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before

    both = _train(*_args(tiny_model_dir, runs, "r", 2), "--resume", "--overwrite")
    assert both.returncode == 2 and "exclude each other" in both.stderr and TRACEBACK not in both.stderr
    none = _train(*_args(tiny_model_dir, runs, "fresh", 2), "--resume")
    assert none.returncode == 2 and "cannot resume run 'fresh'" in none.stderr and TRACEBACK not in none.stderr

    over = _train(*_args(tiny_model_dir, runs, "r", 2, "checkpoint.keep=1"), "--overwrite")
    assert over.returncode == 0, over.stderr[-3000:]
    assert sorted(ckpt.list_checkpoints(run)) == [1]  # the old run's step 2 and 3 are gone with it
    assert ckpt.latest_step(run) == 1 and _steps(run) == [-1, 0, 1]
    resumed = _train(*_args(tiny_model_dir, runs, "r", 3, "checkpoint.keep=1"), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "(resuming at step 2)" in resumed.stdout
    assert [ln.split()[1] for ln in resumed.stdout.splitlines() if ln.startswith("step ")] == ["3/3"]
    assert "sft " not in resumed.stdout  # no second warm start
    assert ckpt.latest_step(run) == 2 and _steps(run) == [-1, 0, 1, 2]
    # RL seconds so far on every step, going on across the resume (success against wall time)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    clock = [r["time/run_s"] for r in records if r["step"] >= 0]
    assert len(clock) == 3 and all(0 < a < b for a, b in itertools.pairwise(clock))
    # the weight sync's size beside its time (a step with no update syncs nothing)
    assert all(r["system/sync_bytes"] > 1000 or r["actor/updates"] == 0 for r in records if r["step"] >= 0)


@pytest.mark.slow
def test_killed_run_resumes_where_it_stopped_with_the_same_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    steps = 6
    full = _train(*_args(tiny_model_dir, runs, "full", steps))
    assert full.returncode == 0, full.stderr[-3000:]

    cut = runs / "cut"
    proc = subprocess.Popen(
        [ROCKROLL, "train", *_args(tiny_model_dir, runs, "cut", steps)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while ckpt.latest_step(cut) is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be killed"
        proc.kill()  # a crash: no clean-up of any kind
    finally:
        proc.kill()
        proc.wait()
    stopped = ckpt.latest_step(cut)
    assert stopped is not None and stopped < steps - 1
    at_kill = ckpt.load_weights(ckpt.latest_checkpoint(cut))

    resumed = _train(*_args(tiny_model_dir, runs, "cut", steps), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"(resuming at step {stopped + 1})" in resumed.stdout
    lines = [ln.split()[1] for ln in resumed.stdout.splitlines() if ln.startswith("step ")]
    assert lines == [f"{s + 1}/{steps}" for s in range(stopped + 1, steps)]
    assert _steps(cut) == list(range(-1, steps))  # no step logged twice, none missing

    final_full = ckpt.load_weights(runs / "full" / "checkpoints" / f"step-{steps - 1}")
    final_cut = ckpt.load_weights(cut / "checkpoints" / f"step-{steps - 1}")
    assert not _same(at_kill, final_cut)  # training went on after the resume
    assert _same(final_full, final_cut)  # ...exactly as the run that was never interrupted
    full_opt = torch.load(runs / "full" / "checkpoints" / f"step-{steps - 1}" / "optimizer.pt", weights_only=True)
    cut_opt = torch.load(cut / "checkpoints" / f"step-{steps - 1}" / "optimizer.pt", weights_only=True)
    assert torch.allclose(full_opt["opt"]["state"][0]["exp_avg"], cut_opt["opt"]["state"][0]["exp_avg"], atol=1e-6)
    assert json.loads((cut / "summary.json").read_text())["success_end"] == pytest.approx(
        json.loads((runs / "full" / "summary.json").read_text())["success_end"]
    )


@pytest.mark.slow
def test_train_with_overrides_only_takes_the_defaults(tiny_model_dir: Path, tmp_path: Path) -> None:
    from rockroll.trainer.config_io import config_to_dict, load_config

    over = [
        f"model.path={tiny_model_dir}", "model.build_tiny=false", f"logging.run_dir={tmp_path}", "name=dflt",
        "total_steps=0", "sft.steps=0", "rollout.eval_episodes=2", "logging.tensorboard=false",
    ]  # fmt: skip
    res = _train(*over)
    assert res.returncode == 0, res.stderr[-3000:]
    saved = load_config(tmp_path / "dflt" / "config.yaml")
    assert config_to_dict(saved) == config_to_dict(load_config(None, over))
    assert saved.rollout.mode == "multiturn" and saved.seed == 0  # the defaults, not frozenlake_tiny.yaml's


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["total_steps"], ["config error: no config file total_steps", "overrides are key=value, e.g. total_steps=20"]),
        (["missing.yaml", "total_steps=2"], ["config error: no config file missing.yaml", "see configs/ for examples"]),
        ([CONFIG, CONFIG], None),
        (["optim.lrr=1"], None),
        (["total_steps=-1"], None),
    ],
)
def test_bad_train_arguments_end_in_one_clear_error(args: list[str], expected: list[str] | None) -> None:
    res = _train(*args, timeout=60)
    assert res.returncode == 2, res.stderr
    assert TRACEBACK not in res.stderr and 1 <= len(res.stderr.strip().splitlines()) <= 2, res.stderr
    if expected is not None:
        assert res.stderr.splitlines() == expected
    elif args[0] == CONFIG:
        assert "expected one YAML config and key=value overrides" in res.stderr
    else:
        assert res.stderr.startswith("config error:") and args[0].split("=")[0] in res.stderr


def test_yaml_may_follow_the_overrides() -> None:
    from rockroll.cli.train import _split_args

    assert _split_args("total_steps=2", [CONFIG, "name=x"]) == (CONFIG, ["total_steps=2", "name=x"])
    assert _split_args("total_steps=2", []) == (None, ["total_steps=2"])
    assert _split_args(None, []) == (None, [])


@pytest.mark.slow
def test_progress_bars_on_a_terminal(tiny_model_dir: Path, tmp_path: Path) -> None:
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    args = _args(tiny_model_dir, tmp_path, "tty", 2)
    proc = subprocess.Popen([ROCKROLL, "train", *args], stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other end closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert proc.wait(timeout=240) == 0
    reader.join(timeout=10)
    os.close(master)
    out = b"".join(chunks).decode(errors="replace")
    assert "warm start (SFT)" in out and "train" in out and "━" in out  # rich bars
    assert "2/2" in out and "eval: success" in out
    assert "step 1/2  success" not in out  # the plain log lines are for pipes and files


@pytest.mark.parametrize("command", ["train", "export", "plot"])
def test_help_has_an_example(command: str) -> None:
    res = subprocess.run([ROCKROLL, command, "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0
    assert "Example" in res.stdout and f"rockroll {command} " in res.stdout.split("Example", 1)[1]


@pytest.mark.slow
def test_multiturn_run_without_held_out_evaluation(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``rollout.eval_episodes=0`` (no held-out maps): the run trains and says it did not evaluate,
    instead of crashing on the references of zero maps or printing a 0% success."""
    runs = tmp_path / "runs"
    slippery = str(Path(CONFIG).with_name("frozenlake_slippery.yaml"))
    res = _train(
        slippery, f"model.path={tiny_model_dir}", "model.build_tiny=false", f"logging.run_dir={runs}", "name=m",
        "total_steps=2", "time_budget_s=0", "rollout.scheduler.group_size=2", "rollout.scheduler.num_env_groups=2",
        "rollout.eval_episodes=0", "rollout.eval_every=0", "rollout.select_episodes=0", "sft.steps=2",
        "sft.num_demos=4", "sft.batch_size=2", "logging.tensorboard=false", "logging.progress=false",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert TRACEBACK not in res.stderr + res.stdout
    assert "no held-out evaluation" in res.stdout
    assert "0.0%" not in res.stdout
    assert _steps(runs / "m")[-1] == 1
