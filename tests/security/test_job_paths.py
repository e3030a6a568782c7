"""Issue 13, item 4: a job runs user input, so it is confined to its owner's job directory and allowlist.

Attacks on a real ``rockroll serve`` (alice's token): a train job that reads ``/etc/passwd`` or the
server's database through ``config_path``, writes its run, model or DeepSpeed output outside its
folder (absolute paths, ``..``, overrides, a symlink planted in its folder, a run named ``..``); an eval
job whose engine ``base_url`` is the control plane's own admin routes or a metadata service. Each
answers 422 naming the field and writes nothing. Then a job's work runs in a worker process of its
own (not the server), with a scrubbed environment, in alice's folder; and an allowlisted engine URL is
the only one accepted (user parts, look-alike hosts and other ports are refused).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rockroll.api.jobs.paths import owner_folder
from rockroll.api.jobs.urls import url_allowed
from rockroll.api.server.app import create_app
from rockroll.api.server.serve_proc import ServerProc
from rockroll.client.sdk import ApiClientError, Client
from tests.api.conftest import make_settings


def _refused(c: Client, kind: str, config: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ApiClientError) as e:
        c.create_job(kind, config)
    return {"status": e.value.status, "code": e.value.code, "key": e.value.details.get("key"), "msg": e.value.message}


def _outside() -> Path:
    return Path("/tmp") / f"rockroll-pwn-{uuid.uuid4().hex[:8]}"


def test_train_paths_that_leave_the_job_directory_are_refused(alice: Client, server: ServerProc) -> None:
    out = _outside()
    db_file = server.data_dir / "rockroll.db"
    before = len(alice.list_jobs())
    attacks = [
        ({"config_path": "/etc/passwd"}, "config_path"),
        ({"config_path": str(db_file)}, "config_path"),
        ({"config_path": "../../rockroll.db"}, "config_path"),
        ({"logging": {"run_dir": str(out)}}, "logging.run_dir"),
        ({"logging": {"run_dir": "runs/../../../" + out.name}}, "logging.run_dir"),
        ({"overrides": [f"logging.run_dir={out}"]}, "logging.run_dir"),
        ({"model": {"path": "/etc"}}, "model.path"),
        ({"model": {"path": str(out / "model")}}, "model.path"),
        ({"overrides": ["model.path=../../../x"]}, "model.path"),
        ({"name": "..", "logging": {"run_dir": "."}}, "name"),
        ({"workers": {"deepspeed_config": {"tensorboard": {"output_path": str(out)}}}},
         "workers.deepspeed_config.tensorboard.output_path"),
    ]  # fmt: skip
    for config, key in attacks:
        got = _refused(alice, "train", config)
        assert (got["status"], got["code"], got["key"]) == (422, "job_path", key), (config, got)
        assert key in got["msg"]
    assert not out.exists()
    assert len(alice.list_jobs()) == before  # nothing was queued


def test_a_symlink_out_of_the_job_directory_is_refused(alice: Client, server: ServerProc) -> None:
    """A link in alice's folder (planted by a job, or left by an admin) leading to the server's data."""
    out = _outside()
    out.mkdir()
    try:
        mine = server.data_dir / "jobs" / owner_folder("alice")
        mine.mkdir(parents=True, exist_ok=True)
        (mine / "escape").symlink_to(out, target_is_directory=True)
        (mine / "db.yaml").symlink_to(server.data_dir / "rockroll.db")
        for config, key in [
            ({"logging": {"run_dir": "escape/runs"}}, "logging.run_dir"),
            ({"model": {"path": "escape/model"}}, "model.path"),
            ({"config_path": "db.yaml"}, "config_path"),
        ]:
            got = _refused(alice, "train", config)
            assert (got["status"], got["key"]) == (422, key), got
        got = _refused(alice, "eval", {"engine": {"kind": "random"}, "output_dir": "escape"})
        assert (got["status"], got["key"]) == (422, "output_dir"), got
        assert list(out.iterdir()) == []
    finally:
        for p in (out,):
            os.rmdir(p)


def test_eval_paths_and_engine_urls_are_refused(alice: Client, server: ServerProc) -> None:
    out = _outside()
    for config, key in [
        ({"engine": {"kind": "random"}, "output_dir": str(out)}, "output_dir"),
        ({"engine": {"kind": "hf", "args": {"model_path": "/etc"}}}, "engine.args.model_path"),
        ({"engine": {"kind": "random", "args": {"tokenizer": "../../.."}}}, "engine.args.tokenizer"),
    ]:
        got = _refused(alice, "eval", config)
        assert (got["status"], got["code"], got["key"]) == (422, "job_path", key), got
    port = server.url.rsplit(":", 1)[1]
    for url in (f"{server.url}/", f"http://127.0.0.1:{port}/v1/tokens", "http://169.254.169.254/latest/meta-data"):
        config = {
            "engine": {"kind": "openai", "args": {"base_url": url, "tokenizer": "tok"}},
            "envs": [{"env": "FrozenLake-v0"}],
        }
        got = _refused(alice, "eval", config)
        assert (got["status"], got["code"], got["key"]) == (422, "job_url", "engine.args.base_url"), got
        assert "job_engine_urls" in got["msg"]
    assert not out.exists()


def test_train_jobs_play_only_envs_their_owner_may_play(alice: Client) -> None:
    """An id alice may not play (unknown, or another owner's private env) is 404 at submission, as for sessions;
    her own custom envs are accepted (tests/api/test_custom_env_journeys.py trains on one)."""
    for env_id in ("MyCustomEnv-v0", "bob/Secret-v0"):
        got = _refused(alice, "train", {"rollout": {"env_id": env_id}})
        assert (got["status"], got["code"]) == (404, "env_not_found"), got


def test_a_job_runs_in_its_own_worker_process(alice: Client, server: ServerProc) -> None:
    job = alice.create_job("eval", {"env": "FrozenLake-v0", "episodes": 100_000})
    try:
        pid = 0
        deadline = time.monotonic() + 60
        while not pid and time.monotonic() < deadline:
            for line in alice.job_logs(job["id"]).splitlines():
                if "worker pid " in line:
                    pid = int(line.split("worker pid ")[1].split()[0])
            time.sleep(0.2)
        assert pid and server.proc is not None and pid != server.proc.pid
        status = Path(f"/proc/{pid}/status").read_text()
        assert f"PPid:\t{server.proc.pid}" in status  # the server started it: a process of its own
        assert b"rockroll.api.jobs.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
        env = dict(
            item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in item
        )
        assert env["HOME"] == str(server.data_dir / "jobs" / owner_folder("alice"))
        # no token, no settings, no database URL: only the server's minimum isolation (the confinement rule)
        assert [k for k in env if k.startswith("ROCKROLL_")] == ["ROCKROLL_MIN_ISOLATION"]
        assert os.readlink(f"/proc/{pid}/cwd") == env["HOME"]
    finally:
        alice.cancel_job(job["id"])
    assert alice.wait_job(job["id"], timeout_s=60)["state"] == "cancelled"


@pytest.mark.slow
def test_only_allowlisted_engine_urls_pass(data_dir: Path) -> None:
    allowed = ["http://127.0.0.1:9", "llm.internal:8000"]
    assert url_allowed("http://127.0.0.1:9/v1", allowed) and url_allowed("https://llm.internal:8000/v1", allowed)
    for url in (
        "http://127.0.0.1:9@127.0.0.1:8080/v1",  # user part: the host is the one after '@'
        "http://127.0.0.1:90/v1",
        "http://127.0.0.1:9.evil.example/v1",
        "http://llm.internal:8001/",
        "http://localhost:9/v1",
        "file:///etc/passwd",
        "http://127.0.0.1:9\\@evil/",
        "gopher://127.0.0.1:9/",
    ):
        assert not url_allowed(url, allowed), url
    with TestClient(create_app(make_settings(data_dir, dev_mode=True, job_engine_urls=allowed))) as c:
        args = {"base_url": "http://127.0.0.1:90/v1", "tokenizer": "tok"}
        refused = c.post("/v1/jobs", json={"kind": "eval", "config": {"engine": {"kind": "openai", "args": args}}})
        assert refused.status_code == 422 and refused.json()["error"]["details"]["setting"] == "job_engine_urls"
        args["base_url"] = "http://127.0.0.1:9/v1"
        ok = c.post("/v1/jobs", json={"kind": "eval", "config": {"engine": {"kind": "openai", "args": args}}})
        assert ok.status_code == 201, ok.text
        c.post(f"/v1/jobs/{ok.json()['id']}/cancel")
        deadline = time.monotonic() + 60
        while c.get(f"/v1/jobs/{ok.json()['id']}").json()["state"] in ("queued", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.2)


def test_an_unconfined_worker_says_so(data_dir: Path) -> None:
    """Where a worker cannot be confined (here: ``job_user=''``), every job's log says so."""
    with TestClient(create_app(make_settings(data_dir, dev_mode=True, job_user=""))) as c:
        job = c.post("/v1/jobs", json={"kind": "eval", "config": {"env": "FrozenLake-v0", "episodes": 1}}).json()
        deadline = time.monotonic() + 120
        while job["state"] in ("queued", "running"):
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
            job = c.get(f"/v1/jobs/{job['id']}").json()
        logs = c.get(f"/v1/jobs/{job['id']}/logs").text
        assert job["state"] == "succeeded", (job, logs)
        assert "warning: job_user is empty: job workers run as the server's user" in logs
        assert "the server's user, not confined" in logs
        for sb in c.app.state.rr.placement.list():
            c.app.state.rr.placement.delete(sb.id)
