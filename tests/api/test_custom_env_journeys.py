"""A user's own env (Nim against a random opponent, uploaded by alice as ``alice/Nim-v0``) trained and evaluated
from everywhere, through a real ``rockroll serve-api`` on 127.0.0.1 and the real ``rockroll`` command line:
``rockroll train --url``, a train job, ``rockroll eval --model --url``, an eval job with a model; the ``remote``
source's group ids; bad ids failing before anything is built; a failed start leaving no run folder."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from rockroll.agentrl.eval.run import run_eval
from rockroll.agentrl.sources.remote import RemoteSource
from rockroll.api.jobs.paths import owner_folder
from rockroll.api.server.serve_proc import ServerProc
from rockroll.client import Client
from tests.api.conftest import readable_by_jobs
from tests.api.test_cli_errors import assert_short, rockroll

NIM = Path(__file__).with_name("nim.py")
#: a run of two steps on a tiny model: the journeys, not learning
TRAIN = [
    "total_steps=2", "torch_threads=1", "logging.tensorboard=false", "logging.progress=false", "sft.steps=0",
    "rollout.eval_episodes=2", "rollout.episode.max_tokens_per_turn=8", "rollout.episode.max_turns=4",
    "rollout.scheduler.group_size=2", "rollout.scheduler.num_env_groups=2", "model.build_tiny=false",
]  # fmt: skip


@pytest.fixture(scope="module")
def nim(server: ServerProc) -> str:
    """``alice/Nim-v0`` (private), and bob's private ``bob/Secret-v0``, registered through the API."""
    with Client(server.url, server.tokens["bob"]) as c:  # type: ignore[attr-defined]
        c.register_env("Secret-v0", entry_point="nim:NimEnv", source=NIM, max_steps=6)
    with Client(server.url, server.tokens["alice"]) as c:  # type: ignore[attr-defined]
        return c.register_env("Nim-v0", entry_point="nim:NimEnv", source=NIM, max_steps=6)["id"]


@pytest.fixture(scope="module")
def alice_jobs(server: ServerProc) -> Path:
    """alice's job directory on the server: a job's relative paths resolve there."""
    return server.data_dir / "jobs" / owner_folder("alice")


@pytest.fixture(scope="module")
def tiny_model(alice_jobs: Path) -> Path:
    """A tiny model in alice's job directory (the CLI reads it by its path, jobs as ``tiny``)."""
    pytest.importorskip("torch")
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    shape = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64}
    return readable_by_jobs(build_tiny_model(alice_jobs / "tiny", TinyModelConfig(**shape, episodes_per_env=5)))


def _as(server: ServerProc, who: str) -> dict[str, str]:
    return {"ROCKROLL_URL": server.url, "ROCKROLL_TOKEN": server.tokens[who]}  # type: ignore[attr-defined]


def test_remote_source_sends_group_ids_the_server_takes(
    server: ServerProc, nim: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group ids rollouts make (``<env id>/<i>``, with the owner's '/' too) open sessions; an eval config with
    ``source: {kind: remote}`` plays every episode (none masked), built-in and custom envs alike."""
    with Client(server.url, server.tokens["alice"]) as c:  # type: ignore[attr-defined]
        source = RemoteSource(c)
        for env_id in (nim, "FrozenLake-v0"):
            env = source.open(env_id, {}, group=f"{env_id}/3")
            assert isinstance(env.reset(seed=0)[0], str)
            source.close(env)
    monkeypatch.setenv("ROCKROLL_TOKEN", server.tokens["alice"])  # type: ignore[attr-defined]
    config = {
        "engine": {"kind": "random"}, "source": {"kind": "remote", "url": server.url}, "episode": {"max_turns": 3},
        "envs": [{"env": nim, "episodes": 2}, {"env": "FrozenLake-v0", "episodes": 2}],
    }  # fmt: skip
    report = run_eval(config, progress=False)
    assert report.summary["count"] == 4 and report.summary["masked"] == 0, report.episodes


def test_a_422_names_the_field_and_the_server_logs_it(server: ServerProc) -> None:
    auth = {"Authorization": f"Bearer {server.tokens['alice']}"}  # type: ignore[attr-defined]
    r = httpx.post(f"{server.url}/v1/sessions", json={"env": "FrozenLake-v0", "group": "a/b"}, headers=auth)
    assert r.status_code == 422, r.text
    assert "body.group" in r.json()["error"]["message"] and "pattern" in r.json()["error"]["message"]
    deadline = time.monotonic() + 10
    while "422 on POST /v1/sessions: " not in server.log():
        assert time.monotonic() < deadline, server.log()[-2000:]
        time.sleep(0.05)


@pytest.mark.slow
def test_bad_ids_fail_before_anything_is_built(server: ServerProc, nim: str, tmp_path: Path) -> None:
    """A bare name, another owner's private env, no server, a setting a server's env cannot serve: one or two
    lines, before a model is built or a run folder made."""
    base = ["train", "name=bad", "model.path=built", "model.build_tiny=true", "total_steps=2"]
    out = rockroll(*base, "rollout.env_id=Nim-v0", "--url", server.url, cwd=tmp_path, **_as(server, "alice"))
    assert_short(out, "No env registered as 'Nim-v0'", nim)  # the server's "did you mean" names the full id
    out = rockroll(*base, "rollout.env_id=bob/Secret-v0", cwd=tmp_path, **_as(server, "alice"))
    assert_short(out, "No env registered as 'bob/Secret-v0'")  # $ROCKROLL_URL: bob's private env is unknown
    out = rockroll(*base, f"rollout.env_id={nim}", cwd=tmp_path)
    assert_short(out, f"No env registered as '{nim}'", "--url")
    out = rockroll(*base, f"rollout.env_id={nim}", "sft.steps=3", cwd=tmp_path, **_as(server, "alice"))
    assert_short(out, "sft.steps")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "built").exists()
    out = rockroll("job", "submit-train", "rollout.env_id=bob/Secret-v0", **_as(server, "alice"))
    assert_short(out, "404 env_not_found", "bob/Secret-v0")
    out = rockroll("job", "submit-train", "rollout.env_id=Nim-v0", **_as(server, "alice"))
    assert_short(out, "404 env_not_found", nim)
    out = rockroll("eval", "--model", str(tmp_path), "--env", "Nim-v0", "--seeds", "0:2", **_as(server, "alice"))
    assert_short(out, "No env registered as 'Nim-v0'", nim)


@pytest.mark.slow
def test_a_failed_start_leaves_no_run_folder_for_the_retry(tmp_path: Path) -> None:
    args = ["train", "name=again", "model.path=missing", "model.build_tiny=false", "total_steps=1"]
    for _ in range(2):  # the retry fails the same way, not with "run 'again' exists"
        assert_short(rockroll(*args, cwd=tmp_path), "no model at missing")
        assert not (tmp_path / "runs" / "again").exists()


@pytest.mark.slow
def test_cli_trains_and_evaluates_a_custom_env_through_the_server(
    server: ServerProc, nim: str, tiny_model: Path, tmp_path: Path
) -> None:
    token = {"ROCKROLL_TOKEN": server.tokens["alice"]}  # type: ignore[attr-defined]
    out = rockroll(
        "train", f"rollout.env_id={nim}", f"model.path={tiny_model}", "name=nim0", *TRAIN, "--url", server.url,
        cwd=tmp_path, timeout=600, **token,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert f"on {nim}, 2 steps (envs through {server.url})" in out.stdout
    run = tmp_path / "runs" / "nim0"
    assert '"env/Nim/success"' in (run / "metrics.jsonl").read_text()  # the tag drops the owner's namespace
    report = tmp_path / "report.json"
    out = rockroll(
        "eval", "--model", str(run / "export" / "final"), "--env", nim, "--seeds", "0:2", "--no-progress",
        "--json", str(report), "--url", server.url, cwd=tmp_path, **token,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    episodes = json.loads(report.read_text())["episodes"]
    assert [(e["env"], e["masked"]) for e in episodes] == [(nim, False), (nim, False)]


@pytest.mark.slow
def test_jobs_train_and_evaluate_a_custom_env(server: ServerProc, nim: str, tiny_model: Path, alice_jobs: Path) -> None:
    """A train job plays alice's env in her sandboxes; an eval job scores the model it exported."""
    model = str(tiny_model.relative_to(alice_jobs))
    out = rockroll(
        "job", "submit-train", f"rollout.env_id={nim}", f"model.path={model}", "name=nimjob", *TRAIN, "--follow",
        timeout=600, **_as(server, "alice"),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert (alice_jobs / "runs" / "nimjob" / "export" / "final" / "config.json").exists()
    out = rockroll(
        "job", "submit-eval", nim, "--model", "runs/nimjob/export/final", "--episodes", "2", "--max-turns", "4",
        "--follow", timeout=600, **_as(server, "alice"),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert f"eval/{nim}/success" in out.stdout


@pytest.mark.slow
def test_a_train_job_plays_a_tool_env(server: ServerProc, alice_jobs: Path) -> None:
    """A train job on Lookup-v0 (a tool env) with a tiny hermes model: calls parsed, results as tool messages, the
    tool metrics in the run's metrics."""
    pytest.importorskip("torch")
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    shape = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64}
    cfg = TinyModelConfig(**shape, episodes_per_env=5, env_ids=("Lookup-v0",), chat_template="hermes")
    readable_by_jobs(build_tiny_model(alice_jobs / "tiny-tools", cfg))
    out = rockroll(
        "job", "submit-train", "rollout.env_id=Lookup-v0", "model.path=tiny-tools", "name=toolsjob", *TRAIN,
        "rollout.episode.max_tokens_per_turn=32", "sft.steps=2", "--follow", timeout=600, **_as(server, "alice"),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    rows = [json.loads(line) for line in (alice_jobs / "runs" / "toolsjob" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "rollout/tools/parse_ok_turns" in r]
    assert len(steps) == 2 and all(0 <= r["rollout/tools/turns_with_call"] <= 1 for r in steps)
