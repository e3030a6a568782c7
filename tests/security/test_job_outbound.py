"""Issue 48 items 2 and 7: what a job may reach, send and learn beyond its owner's folder.

Attacks on a real ``rockroll serve`` (alice's token; its allowlist empty): a judge reward left at its
default URL (the worker would POST every rubric to ``127.0.0.1:8000``), a train engine or W&B left at
theirs, a judge naming a server variable as its key, an RLVR dataset linked into bob's folder, env kwargs
probing which files exist; each answers 422 naming the field. Then ``/metrics``: behind its token when one
is set, else open without owner names or server paths; and a train job's first log line says what it
trains (an RLVR run: its dataset, not ``rollout.env_id``).
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rockroll.api.alerts.rules import Observation
from rockroll.api.jobs.configs import effective_config
from rockroll.api.jobs.outbound import key_env_values
from rockroll.api.jobs.paths import JobDirs, owner_folder
from rockroll.api.server.app import create_app
from rockroll.api.server.errors import ApiError
from rockroll.api.server.serve_proc import ServerProc
from rockroll.client.sdk import ApiClientError, Client
from rockroll.trainer.run.jobs import config_for_job, describe_run, run_job
from tests.api.conftest import make_settings

JUDGE = "rollout.rlvr.rewards.routes.math.options"


def _refused(c: Client, kind: str, config: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ApiClientError) as e:
        c.create_job(kind, config)
    d = e.value.details
    return {"status": e.value.status, "code": e.value.code, "key": d.get("key"), "setting": d.get("setting"),
            "msg": e.value.message}  # fmt: skip


def _judge(**options: Any) -> dict[str, Any]:
    route = {"reward": "judge", **({"options": options} if options else {})}
    return {"rollout": {"mode": "rlvr", "rlvr": {"rewards": {"routes": {"math": route}}}}}


# ------------------------------------------------------------------ item 2: every outgoing URL, defaults included
def test_default_and_explicit_outgoing_urls_are_refused(alice: Client, server: ServerProc) -> None:
    before = len(alice.list_jobs())
    attacks = [
        (_judge(), f"{JUDGE}.base_url"),  # the default: http://127.0.0.1:8000/v1/chat/completions
        (_judge(base_url=f"{server.url}/v1"), f"{JUDGE}.base_url"),
        (_judge(base_url="http://169.254.169.254/latest"), f"{JUDGE}.base_url"),
        ({"rollout": {"engine": {"kind": "openai"}}}, "rollout.engine.base_url"),  # its default
        ({"rollout": {"engine": {"kind": "sglang", "base_url": server.url}}}, "rollout.engine.base_url"),
        ({"logging": {"wandb": True}}, "logging.wandb"),  # W&B's cloud
    ]
    for config, key in attacks:
        got = _refused(alice, "train", config)
        assert (got["status"], got["code"], got["key"], got["setting"]) == (422, "job_url", key, "job_engine_urls"), got
    assert "unset: its default" in _refused(alice, "train", _judge())["msg"]
    assert len(alice.list_jobs()) == before  # nothing was queued


def test_an_allowed_default_is_what_the_worker_runs(tmp_path: Path) -> None:
    dirs = JobDirs(tmp_path)
    out = effective_config("train", _judge(), dirs=dirs, owner_dir=dirs.ensure("alice"),
                           engine_urls=("http://127.0.0.1:8000/v1",))  # fmt: skip
    options = out["rollout"]["rlvr"]["rewards"]["routes"]["math"]["options"]
    # pinned as checked; the default key variable (OPENAI_API_KEY) is not listed, so none is read
    assert options == {"base_url": "http://127.0.0.1:8000/v1", "api_key_env": ""}


# ------------------------------------------------------------------ item 7d: api_key_env only from the admin's list
def test_api_key_env_is_refused_unless_listed(alice: Client, tmp_path: Path) -> None:
    for name in ("PATH", "ROCKROLL_CLUSTER_SECRET", "AWS_SECRET_ACCESS_KEY"):
        got = _refused(alice, "train", _judge(api_key_env=name))
        assert (got["status"], got["code"], got["key"], got["setting"]) == (
            422, "job_key_env", f"{JUDGE}.api_key_env", "job_api_key_envs"), got  # fmt: skip
        assert name in got["msg"] and "job_api_key_envs" in got["msg"]
    dirs = JobDirs(tmp_path)
    config = _judge(base_url="http://llm.internal:8000", api_key_env="RR_JUDGE_KEY")
    out = effective_config("train", config, dirs=dirs, owner_dir=dirs.ensure("alice"),
                           engine_urls=("llm.internal:8000",), key_envs=("RR_JUDGE_KEY",))  # fmt: skip
    environ = {"RR_JUDGE_KEY": "sk-1", "PATH": "/bin", "OTHER": "x"}
    assert key_env_values(out, ("RR_JUDGE_KEY",), environ) == {"RR_JUDGE_KEY": "sk-1"}  # what its worker must get
    assert key_env_values(out, (), environ) == {}
    with pytest.raises(ApiError) as e:  # the server's own settings, even listed
        effective_config("train", _judge(base_url="http://llm.internal:8000", api_key_env="ROCKROLL_CLUSTER_SECRET"),
                         dirs=dirs, owner_dir=dirs.owner_dir("alice"), engine_urls=("llm.internal:8000",),
                         key_envs=("ROCKROLL_CLUSTER_SECRET",))  # fmt: skip
    assert (e.value.status, e.value.code) == (422, "job_key_env")


# ------------------------------------------------------------------ item 7c: a dataset linked out of the folder
def test_a_symlinked_dataset_is_refused(alice: Client, server: ServerProc) -> None:
    jobs = server.data_dir / "jobs"
    mine, bobs = jobs / owner_folder("alice"), jobs / owner_folder("bob")
    for d in (mine, bobs):
        d.mkdir(parents=True, exist_ok=True)
    (bobs / "private.jsonl").write_text('{"prompt": "1+1", "answer": "2", "tag": "math"}\n')
    link = mine / f"bob-{uuid.uuid4().hex[:6]}"
    link.symlink_to(bobs, target_is_directory=True)
    (mine / f"{link.name}.jsonl").symlink_to(bobs / "private.jsonl")
    for path in (f"{link.name}/private.jsonl", f"{link.name}.jsonl", str(bobs / "private.jsonl"), "../x.jsonl"):
        for name in ("path", "heldout_path"):
            dataset = {"source": "jsonl", "path": "mine.jsonl", name: path}
            got = _refused(alice, "train", {"rollout": {"mode": "rlvr", "rlvr": {"dataset": dataset}}})
            assert (got["status"], got["code"], got["key"]) == (422, "job_path", f"rollout.rlvr.dataset.{name}"), got


# ------------------------------------------------------------------ item 7b: env kwargs tell nothing of the files
def test_env_kwarg_paths_answer_the_same_whether_a_file_exists(alice: Client, server: ServerProc) -> None:
    mine = server.data_dir / "jobs" / owner_folder("alice")
    mine.mkdir(parents=True, exist_ok=True)
    there, missing = server.data_dir / "rockroll.db", server.data_dir / f"none-{uuid.uuid4().hex[:6]}.json"
    tag = uuid.uuid4().hex[:6]
    (mine / f"there-{tag}").symlink_to(there)
    (mine / f"missing-{tag}").symlink_to(missing)
    pairs = [(str(there), str(missing)), (f"there-{tag}", f"missing-{tag}"), ("../../rockroll.db", "../../none.json")]
    for a, b in pairs:
        answers = []
        for value in (a, b):
            for kind, config, key in (
                ("eval", {"env": "WebShop-v0", "kwargs": {"catalog_path": value}}, "kwargs.catalog_path"),
                ("eval", {"engine": {"kind": "random"}, "envs": [{"env": "WebShop-v0", "kwargs": {"catalog_path": value}}]},
                 "envs.0.kwargs.catalog_path"),
                ("train", {"rollout": {"env_id": "WebShop-v0", "env_kwargs": {"catalog_path": value}}},
                 "rollout.env_kwargs.catalog_path"),
            ):  # fmt: skip
                got = _refused(alice, kind, config)
                assert (got["status"], got["code"], got["key"]) == (422, "job_path", key), got
                answers.append(got["msg"].replace(repr(value), "PATH"))
        assert answers[:3] == answers[3:], answers  # the same answer: no file-exists oracle


# ------------------------------------------------------------------ item 7a: /metrics
def _failures(c: TestClient) -> None:
    c.app.state.rr.alerts.last = Observation(window_s=60, job_failures={"alice": 3}, disk_free={"/srv/secret": 0.5})


def test_metrics_need_the_token_when_one_is_set(data_dir: Path) -> None:
    token = "metrics-" + uuid.uuid4().hex
    with TestClient(create_app(make_settings(data_dir, dev_mode=True, metrics_token=token))) as c:
        _failures(c)
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {token}"}):
            r = c.get("/metrics", headers=headers)
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", r.text
        text = c.get("/metrics", headers={"Authorization": f"Bearer {token}"}).text
        assert 'rockroll_job_failures_recent{owner="alice"} 3.0' in text and 'path="/srv/secret"' in text


def test_open_metrics_hash_owners_and_paths(dev_client: TestClient) -> None:
    _failures(dev_client)
    text = dev_client.get("/metrics").text
    assert "alice" not in text and "/srv/secret" not in text
    assert re.search(r'rockroll_job_failures_recent\{owner="o-[0-9a-f]{12}"\} 3\.0', text), text
    assert re.search(r'rockroll_disk_free_ratio\{path="p-[0-9a-f]{12}"\}', text)
    assert 'route="/metrics"' in dev_client.get("/metrics").text  # route templates stay readable


# ------------------------------------------------------------------ item 7e: the log says what an RLVR job trains
class _Ctx:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, line: str) -> None:
        self.lines.append(line)

    def report(self, **_: Any) -> None: ...

    def check(self) -> None: ...


def test_an_rlvr_jobs_log_names_its_algorithm_and_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    import rockroll.trainer.pipeline as pipeline

    monkeypatch.setattr(pipeline, "run_training", lambda *a, **k: {"run_dir": "r", "success_end": 1.0})
    ctx = _Ctx()
    run_job({"name": "r1", "rollout": {"mode": "rlvr", "rlvr": {"dataset": {"generator": "countdown"}}}}, ctx)
    assert ctx.lines[0] == "train r1: grpo/ppo on the countdown generator dataset (rlvr), 50 steps", ctx.lines
    mixed = config_for_job({"rollout": {"mode": "rlvr", "envs": [{"env_id": "Sokoban-v0"}]}})
    assert describe_run(mixed).startswith("episode turn credit/ppo on the arithmetic generator dataset + Sokoban-v0")
    assert "FrozenLake" not in describe_run(mixed)
