"""The jobs API's train kind runs the same pipeline (trainer.run.jobs:run_job) with progress and cancellation."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from rockroll.trainer.run.jobs import config_for_job, run_job  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


class Ctx:
    """Records what a job reports (the subset of api.job_worker.WorkerContext the trainer uses)."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.logs: list[str] = []
        self.reports: list[tuple[float | None, dict]] = []
        self.cancel_after = cancel_after

    def log(self, line: str) -> None:
        self.logs.append(line)

    def report(self, *, progress=None, metrics=None) -> None:
        self.reports.append((progress, metrics or {}))

    def check(self) -> None:
        if self.cancel_after is not None and len(self.reports) > self.cancel_after:
            raise KeyboardInterrupt("cancelled")


def test_config_for_job_merges_file_and_overrides() -> None:
    cfg = config_for_job(
        {"config_path": str(CONFIGS / "frozenlake_tiny.yaml"), "optim": {"lr": 2e-4}, "overrides": ["total_steps=3"]}
    )
    assert cfg.optim.lr == pytest.approx(2e-4) and cfg.total_steps == 3 and cfg.optim.mini_batch_size == 64
    with pytest.raises(ValueError, match="did you mean"):
        config_for_job({"optimm": {}})


@pytest.mark.slow
def test_run_job_reports_progress_and_stops_when_cancelled(tiny_model_dir, tmp_path) -> None:
    base = {
        "model": {"path": str(tiny_model_dir)},
        "rollout": {
            "mode": "plan",
            "env_kwargs": {"is_slippery": False},
            "eval_episodes": 4,
            "episode": {"max_tokens_per_turn": 8},
            "scheduler": {"group_size": 2, "num_env_groups": 2},
        },
        "logging": {"run_dir": str(tmp_path), "progress": False, "tensorboard": False},
        "total_steps": 2,
        "name": "job",
    }
    ctx = Ctx()
    out = run_job(base, ctx)
    assert [p for p, _ in ctx.reports] == [0.5, 1.0]
    # the log shows each step as it ends (a line per step and per evaluation), not only start and end
    steps = [i for i, line in enumerate(ctx.logs) if line.startswith("step ")]
    assert [ctx.logs[i].split()[1] for i in steps] == ["1/2", "2/2"], ctx.logs
    assert any(line.startswith("eval") for line in ctx.logs[1 : steps[0]]), ctx.logs  # the first eval, before step 1
    assert steps[-1] < len(ctx.logs) - 1 and ctx.logs[-1].startswith("success before RL")
    assert "success_end" in out and out["steps"] == 2 and (tmp_path / "job" / "metrics.jsonl").exists()
    # report.md: every difficulty row counts its held-out maps (plan mode reported 0 in each), and
    # says which step was exported
    report = (tmp_path / "job" / "report.md").read_text()
    rows = [line.split("|")[1:3] for line in report.splitlines() if line.startswith("| ") and "difficulty" not in line]
    maps = {name.strip(): int(n) for name, n in rows}
    assert maps["all"] == 4 and all(n > 0 for n in maps.values()) and sum(maps.values()) == 8, report
    assert "Exported the last step (2)" in report, report
    with pytest.raises(KeyboardInterrupt):
        run_job({**base, "name": "job2", "total_steps": 5}, Ctx(cancel_after=1))


@pytest.mark.slow
def test_post_v1_jobs_train_runs_the_pipeline(tiny_model_dir, tmp_path) -> None:
    """``POST /v1/jobs`` with kind ``train`` over the real app (SQLite, process sandboxes) trains and reports."""
    import shutil
    import time

    from fastapi.testclient import TestClient

    from rockroll.api.jobs.paths import owner_folder
    from rockroll.api.server.app import create_app
    from rockroll.api.server.serve_proc import scratch_dir
    from tests.api.conftest import make_settings

    data = scratch_dir("trainjob")
    config = {
        "name": "apijob",
        "total_steps": 2,
        "model": {"path": str(tiny_model_dir)},
        "rollout": {
            "mode": "plan",
            "env_kwargs": {"is_slippery": False},
            "eval_episodes": 4,
            "episode": {"max_tokens_per_turn": 8},
            "scheduler": {"group_size": 2, "num_env_groups": 2},
        },
        "logging": {"run_dir": "runs", "progress": False, "tensorboard": False},  # inside the owner's job directory
    }
    models = [str(tiny_model_dir.parent)]  # an admin's read-only model folder
    try:
        with TestClient(create_app(make_settings(data, dev_mode=True, job_model_dirs=models))) as client:
            job = client.post("/v1/jobs", json={"kind": "train", "config": config}).json()
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and job["state"] in ("queued", "running"):
                time.sleep(0.2)
                job = client.get(f"/v1/jobs/{job['id']}").json()
            assert job["state"] == "succeeded", job
            assert job["progress"] == 1.0 and job["metrics"]["steps"] == 2 and "success_end" in job["metrics"]
            logs = client.get(f"/v1/jobs/{job['id']}/logs").text
            assert "success before RL" in logs
            assert "env sessions in this server's sandboxes" in logs  # rollouts ran in sandboxes, not the worker
        assert (data / "jobs" / owner_folder("dev") / "runs" / "apijob" / "metrics.jsonl").exists()
    finally:
        shutil.rmtree(data, ignore_errors=True)
