"""``rockroll job train|eval|logs|metrics|cancel`` and ``rockroll session`` against a real server, as subprocesses."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rockroll.api.jobs.paths import owner_folder
from rockroll.api.server.serve_proc import ServerProc
from tests.api.conftest import readable_by_jobs
from tests.api.test_cli_errors import assert_short, rockroll


@pytest.fixture()
def as_alice(server: ServerProc) -> dict[str, str]:
    return {"ROCKROLL_URL": server.url, "ROCKROLL_TOKEN": server.tokens["alice"]}


def _train_yaml(tmp_path: Path, **extra: str) -> Path:
    """A train config naming paths inside the owner's job directory on the server (relative: the only kind allowed)."""
    cfg = tmp_path / "train.yaml"
    lines = [
        "name: clijob",
        "total_steps: 1",
        "torch_threads: 1",
        f"model: {{path: {extra.get('model', 'no-model')}, build_tiny: {extra.get('build', 'false')}}}",
        "logging: {run_dir: runs, tensorboard: false, progress: false}",
        "rollout: {eval_episodes: 2, episode: {max_tokens_per_turn: 8}, scheduler: {group_size: 2, num_env_groups: 2}}",
        "sft: {steps: 0}",
    ]
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


@pytest.mark.slow
def test_job_train_follow_shows_logs_and_fails_politely(as_alice: dict[str, str], tmp_path: Path) -> None:
    """A train job whose model is missing: --follow prints its id and logs, then one error line; exit 1."""
    out = rockroll("job", "train", str(_train_yaml(tmp_path)), "total_steps=2", "--follow", **as_alice)
    job_id = out.stdout.splitlines()[0]
    assert job_id.startswith("job-"), out
    assert "train clijob" in out.stdout and "2 steps" in out.stdout  # the override applied, the log streamed
    assert_short(out, f"job {job_id} failed", "no model at")
    shown = json.loads(rockroll("job", "show", job_id, **as_alice).stdout)
    assert shown["kind"] == "train" and shown["config"]["overrides"] == ["total_steps=2"]


def test_job_train_rejects_a_bad_key_before_queueing(as_alice: dict[str, str], tmp_path: Path) -> None:
    before = rockroll("job", "list", **as_alice).stdout.count("job-")
    out = rockroll("job", "train", str(_train_yaml(tmp_path)), "optim.lrr=1", **as_alice)
    assert_short(out, "400 invalid_job", "optim.lrr", "optim.lr")
    assert rockroll("job", "list", **as_alice).stdout.count("job-") == before


@pytest.mark.slow
def test_job_eval_follow_prints_metrics_and_exits_zero(as_alice: dict[str, str]) -> None:
    out = rockroll("job", "eval", "FrozenLake-v0", "--episodes", "2", "--follow", **as_alice)
    assert out.returncode == 0, out
    job_id = out.stdout.splitlines()[0]
    assert "episode 1:" in out.stdout and "job succeeded" in out.stdout
    assert "eval/FrozenLake-v0/success" in out.stdout  # the metrics table after the logs
    metrics = json.loads(rockroll("job", "metrics", job_id, "--json", **as_alice).stdout)
    assert metrics["episodes"] == 2 and "eval/FrozenLake-v0/return" in metrics
    logs = rockroll("job", "logs", job_id, "--follow", **as_alice)  # a finished job: prints all, returns
    assert logs.returncode == 0 and logs.stdout.count("episode ") == 2


@pytest.mark.slow
def test_job_train_cancel_stops_a_running_job(as_alice: dict[str, str], server: ServerProc, tmp_path: Path) -> None:
    """A tiny-model train job with many steps: cancel once it reports progress; it ends cancelled."""
    pytest.importorskip("torch")
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    shape = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64}
    jobs = server.data_dir / "jobs" / owner_folder("alice")  # alice's job directory: job paths resolve there
    model = readable_by_jobs(build_tiny_model(jobs / "tiny", TinyModelConfig(**shape, episodes_per_env=5)))
    cfg = _train_yaml(tmp_path, model=str(model.relative_to(jobs)))
    job_id = rockroll("job", "train", str(cfg), "total_steps=100000", **as_alice).stdout.strip()
    deadline = time.monotonic() + 600
    while True:
        job = json.loads(rockroll("job", "show", job_id, **as_alice).stdout)
        assert job["state"] in ("queued", "running") and time.monotonic() < deadline, job
        if job["progress"] > 0:
            break
        time.sleep(1)
    assert rockroll("job", "cancel", job_id, **as_alice).returncode == 0
    out = rockroll("job", "logs", job_id, "--follow", **as_alice)
    assert_short(out, f"job {job_id} cancelled")
    assert json.loads(rockroll("job", "metrics", job_id, "--json", **as_alice).stdout)["step"] >= 0


@pytest.mark.slow
def test_session_output_keeps_brackets(as_alice: dict[str, str]) -> None:
    """WebShop's ``[Search]``, ``search[<your query>]`` and ``click[back to search]`` print as the env wrote them."""
    sid = rockroll("session", "create", "WebShop-v0", **as_alice).stdout.strip()
    try:
        reset = rockroll("session", "reset", sid, "--seed", "0", **as_alice)
        assert reset.returncode == 0 and "[Search]" in reset.stdout
        assert "search[<your query>]" in reset.stdout and "search[the product you want]" in reset.stdout
        step = rockroll("session", "step", sid, "search[shoe rack]", **as_alice)
        assert step.returncode == 0, step
        # lowercase brackets are what Rich took for markup; a long line is not wrapped either
        assert "Available actions: click[back to search], click[next >], click[b0" in step.stdout, step.stdout
    finally:
        rockroll("session", "rm", sid, **as_alice)
