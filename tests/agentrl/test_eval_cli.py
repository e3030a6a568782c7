"""``rockroll eval`` as a user runs it (a subprocess) with the OpenAI-compatible engine against a real
``rockroll serve-model``: a clean run exits 0 with its report; failed episodes still leave a report
(masked, with the reason) and exit 1. ``rockroll job eval --policy expert`` on a real server."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

pytest.importorskip("transformers")

from rockroll.agentrl.eval.run import run_eval  # noqa: E402
from rockroll.agentrl.sources.kinds import CallableSource  # noqa: E402
from rockroll.envhub import UnknownEnvError  # noqa: E402
from tests.agentrl.model_server import ROCKROLL, free_port, model_server  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("eval_cli") / "model", TinyModelConfig(episodes_per_env=3))


@pytest.fixture(scope="module")
def url(tiny: Path) -> Iterator[str]:
    with model_server(tiny) as u:
        yield u


def _eval(tmp_path: Path, engine_args: dict, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out"
    cfg = {
        "name": "oa",
        "engine": {"kind": "openai", "args": engine_args},
        "source": {"kind": "local"},
        "envs": [{"env": "FrozenLake-v0", "seeds": [1, 2, 3]}],
        "episode": {"max_turns": 2, "max_tokens_per_turn": 8, "temperature": 0.0, "max_retries": 0},
        "output_dir": str(out),
    }
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(cfg))
    cmd = [ROCKROLL, "eval", str(path), "--no-progress", "--json", str(tmp_path / "r.json"), *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env), out


@pytest.mark.slow
def test_eval_with_the_openai_engine_exits_0_with_its_report(tiny: Path, url: str, tmp_path: Path) -> None:
    proc, out = _eval(tmp_path, {"base_url": url, "tokenizer": str(tiny)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Event loop is closed" not in proc.stderr, proc.stderr[-3000:]
    assert "| FrozenLake-v0 | 3 |" in proc.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["engine"] == "openai" and [e["seed"] for e in report["episodes"]] == [1, 2, 3]
    assert report["summary"]["count"] == 3 and report["summary"]["masked"] == 0
    assert json.loads((out / "report.json").read_text()) == report and (out / "report.md").is_file()


def test_failed_episodes_still_leave_a_report(tiny: Path, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: every generation fails
    proc, out = _eval(tmp_path, {"base_url": dead, "tokenizer": str(tiny), "max_retries": 0, "timeout_s": 5})
    assert proc.returncode == 1, (proc.stdout, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    assert "3 of 3 episodes failed" in proc.stderr and "EngineError" in proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["masked"] == 3 and all(e["masked"] and e["failure"] for e in report["episodes"])
    assert json.loads((tmp_path / "r.json").read_text()) == report


def test_an_episode_that_raises_is_recorded_not_fatal_to_the_report() -> None:
    import rockroll.envhub as envhub

    def open_env(env_id: str, kwargs: dict) -> object:
        if kwargs.get("size") == 5:
            raise UnknownEnvError("FrozenLake-v9", [])  # a fatal rollout error for this entry only
        return envhub.make(env_id, **kwargs)

    cfg = {
        "engine": {"kind": "random", "args": {"seed": 0}},
        "envs": [
            {"env": "FrozenLake-v0", "seeds": [1, 2]},
            {"env": "FrozenLake-v0", "seeds": [3], "kwargs": {"size": 5}},
        ],
        "episode": {"max_turns": 2},
    }
    report = run_eval(cfg, source=CallableSource(open_env), progress=False)
    assert [(e["seed"], e["masked"]) for e in report.episodes] == [(1, False), (2, False), (3, True)]
    assert report.episodes[2]["failure"].startswith("infra: sandbox_start: UnknownEnvError: ")
    assert "FrozenLake-v9" in report.episodes[2]["failure"] and report.summary["masked"] == 1


@pytest.mark.slow
def test_job_eval_with_the_expert_policy(tmp_path: Path) -> None:
    import rockroll.envhub as envhub
    from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
    from rockroll.envs.play import play_episode

    d = scratch_dir("job-expert")
    server = ServerProc(d)
    token = create_token(server.db_url, "alice")
    server.start()
    env = {**os.environ, "ROCKROLL_URL": server.url, "ROCKROLL_TOKEN": token, "COLUMNS": "200"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ROCKROLL, *args], capture_output=True, text=True, timeout=120, env=env)

    try:
        job = cli("job", "eval", "FrozenLake-v0", "--policy", "expert", "--episodes", "4", "--seed", "10")
        assert job.returncode == 0, job.stderr
        job_id = job.stdout.strip()
        deadline = time.monotonic() + 120
        while True:
            shown = json.loads(cli("job", "show", job_id).stdout)
            if shown["state"] in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert shown["state"] == "succeeded", (shown, cli("job", "logs", job_id).stdout)
        local = [play_episode(envhub.make("FrozenLake-v0"), "expert", 10 + i) for i in range(4)]
        m = shown["metrics"]
        assert m["eval/FrozenLake-v0/success"] == pytest.approx(sum(r.success for r in local) / 4)
        assert m["eval/FrozenLake-v0/steps"] == pytest.approx(sum(r.steps for r in local) / 4)
        assert m["eval/FrozenLake-v0/success"] > 0  # the expert plays, it does not wander
        bad = cli("job", "eval", "Nope-v0", "--policy", "expert")  # refused at submission, as a session would be
        assert bad.returncode == 1 and "404 env_not_found" in bad.stderr and "Nope-v0" in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr
    finally:
        server.cleanup()
