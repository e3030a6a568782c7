"""Issue 48 item 1: one confinement rule, and the code-reward attack of a job worker refused.

The matrix runs each case in a fresh interpreter (root, not root, bubblewrap on the PATH or not) and
asserts the isolation level the process backend reports and that a run below the minimum is refused
(:class:`~rockroll.sandbox.confinement.IsolationTooWeak`), by the backend and by a server's placement.
The attack: answers of a code reward, run the way a job worker runs them (its provider asks the server,
:mod:`rockroll.api.jobs.sandboxes`), try the host's network, hold more memory than the sandbox's cap
across processes, and leave a ``setsid`` child with an empty environment behind; each is refused.
A real RLVR code job then runs end to end with its rewards in the server's confined sandboxes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rockroll.api.jobs.sandboxes import JobSandboxes
from rockroll.api.jobs.worker_sandboxes import RemoteSandboxes
from rockroll.api.server.app import create_app
from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
from rockroll.client.sdk import Client
from tests.api.conftest import make_settings
from tests.sandbox.conftest import confinement_problem, docker_problem

REQUIRED = os.environ.get("ROCKROLL_REQUIRE_DOCKER") == "1"
ROOT = Path(__file__).resolve().parents[2]

_PROBE = textwrap.dedent(
    """
    import json, os, tempfile
    from rockroll.sandbox import confinement
    from rockroll.sandbox.process import ProcessBackend
    out = {"strongest": confinement.strongest()}
    try:
        out["level"] = ProcessBackend(state_dir=tempfile.mkdtemp()).level
    except confinement.IsolationTooWeak as e:
        out["refused"] = str(e)
    if os.environ.get("PROBE_PLACEMENT"):
        from rockroll.api.db import Database
        from rockroll.api.nodes.placement import Placement
        d = tempfile.mkdtemp()
        db = Database(f"sqlite:///{d}/r.db"); db.migrate()
        try:
            p = Placement(backend="process", db_url=f"sqlite:///{d}/r.db", state_dir=d + "/sb", max_sandboxes=1,
                          max_sessions_per_sandbox=1, pool_size=0, db=db, min_isolation=os.environ["PROBE_PLACEMENT"])
            out["placement"] = p.isolation
            p.close(stop_sandboxes=True)
        except confinement.IsolationTooWeak as e:
            out["placement_refused"] = str(e)
    print(json.dumps(out))
    """
)


def _path_without(tmp: Path, *tools: str) -> str:
    """A PATH whose tools are the host's but ``tools`` (links in one folder)."""
    d = tmp / f"bin-{'-'.join(tools)}"
    d.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        for entry in Path(folder).iterdir() if os.path.isdir(folder) else ():
            if entry.name not in tools and not (d / entry.name).exists():
                (d / entry.name).symlink_to(entry)
    return str(d)


def _probe(env: dict[str, str], user: int | None = None) -> dict[str, Any]:
    argv = [sys.executable, "-c", _PROBE]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--"] + argv
    full = {"PATH": os.environ["PATH"], "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "HOME": "/tmp", **env}
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=full, cwd="/tmp")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def confined() -> None:
    problem = confinement_problem()
    if problem:
        if REQUIRED:
            pytest.fail(f"the confinement matrix cannot run: {problem}")
        pytest.skip(problem)


@pytest.mark.slow
def test_the_matrix_reports_its_level_and_refuses_below_the_minimum(confined: None, tmp_path: Path) -> None:
    full = _probe({"PROBE_PLACEMENT": "strongest"})
    assert full == {"strongest": "confined", "level": "confined", "placement": "confined (min_isolation strongest)"}
    no_bwrap = _path_without(tmp_path, "bwrap")
    weaker = _probe({"PATH": no_bwrap})
    assert weaker["strongest"] == weaker["level"] == "unshare"
    # a control plane's minimum passed on (a job worker's environment): nothing weaker starts
    refused = _probe({"PATH": no_bwrap, "ROCKROLL_MIN_ISOLATION": "confined"})
    assert "level" not in refused and "requires at least 'confined'" in refused["refused"]
    bare = _path_without(tmp_path, "bwrap", "unshare")
    none = _probe({"PATH": bare, "PROBE_PLACEMENT": "strongest"})
    assert none["level"] == "none" and "placement" not in none  # a server never runs 'none' unasked
    assert "set min_isolation to 'none'" in none["placement_refused"]
    opted = _probe({"PATH": bare, "PROBE_PLACEMENT": "none"})
    assert opted["placement"].startswith("none (min_isolation none") and "accepted" in opted["placement"]
    nobody = _probe({"PROBE_PLACEMENT": "confined"}, user=65534)  # not root: never confined
    assert nobody["level"] == nobody["strongest"] != "confined"
    assert "requires at least 'confined'" in nobody["placement_refused"]


@pytest.mark.docker
def test_docker_sandboxes_report_container_isolation() -> None:
    problem = docker_problem()
    if problem:
        if REQUIRED:
            pytest.fail(problem)
        pytest.skip(problem)
    from rockroll.sandbox.confinement import check
    from rockroll.sandbox.docker_backend import DockerBackend

    backend = DockerBackend()
    assert backend.level == "container"
    check(backend.level, "confined")  # ranked with a confined process sandbox: raises nothing


def test_a_job_worker_weaker_than_the_machine_offers_is_refused(confined: None) -> None:
    from rockroll.api.jobs.sandboxes import JobConfinement

    rule = JobConfinement(None, None, "strongest")
    assert rule.passed_on() == "confined"  # what the worker's own sandboxes would need
    assert rule.worker_problem(True, "rockroll-sandbox") == ""
    refused = rule.worker_problem(False, "rockroll-sandbox")  # the machine can confine it, and it is not
    assert "refusing to run the job worker with isolation 'none'" in refused
    assert JobConfinement(None, None, "none").worker_problem(False, "rockroll-sandbox") == ""  # the opt-in
    assert rule.worker_problem(False, "") == ""  # job_user '': the operator's choice (said in every job's log)


class _Pipe:
    """The worker's channel, without the pipe: each call goes through JSON to the server's handler."""

    def __init__(self, server: JobSandboxes) -> None:
        self.server = server

    def call(self, op: str, **args: object) -> Any:
        return json.loads(json.dumps(self.server.handle(op, json.loads(json.dumps(args)))))


_NET = """
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    NET = "open"
except OSError:
    NET = "refused"
"""
_MEM = """
import subprocess, sys
hogs = [subprocess.Popen([sys.executable, "-c", "x = bytearray(350 * 2**20); import time; time.sleep(2)"])
        for _ in range(4)]
HELD = sum(p.wait() == 0 for p in hogs)
"""
_LEFT = """
import subprocess
subprocess.Popen(["setsid", "env", "-i", "sh", "-c", "sleep 987; echo escaped"], start_new_session=True)
STARTED = True
"""


def _answers(port: int) -> list[tuple[str, list[str]]]:
    return [
        (f"```python\n{_NET.format(port=port)}\n```", ["assert NET == 'refused'"]),
        (f"```python\n{_MEM}\n```", ["assert HELD == 4"]),  # 1.4 GiB across four processes
        (f"```python\n{_LEFT}\n```", ["assert STARTED"]),
    ]


def _left_behind() -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"sleep 987" in (entry / "cmdline").read_bytes():
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def test_a_job_workers_code_reward_runs_confined(confined: None, data_dir: Path) -> None:
    from rockroll.agentrl.rewards.code import CodeConfig, CodeReward

    listener = socket.create_server(("127.0.0.1", 0))  # the host's network: a service on loopback
    settings = make_settings(data_dir, max_sandboxes=4)
    with TestClient(create_app(settings)) as c:
        assert c.get("/v1/health").json()["isolation"] == "confined (min_isolation strongest)"
        state = c.app.state.rr
        server = JobSandboxes(state.placement, "bob", settings)
        reward = CodeReward(CodeConfig(sandboxes=1, memory_mb=512, t_max_s=20), manager=RemoteSandboxes(_Pipe(server)))
        try:
            scores = [reward("p", answer, {"tests": tests}) for answer, tests in _answers(listener.getsockname()[1])]
            assert server.levels == {"confined"}
            live = {sb.id for sb in state.placement.list()}
            assert state.placement.owners.held("bob", live) == 1  # the owner's, counted against its quota
        finally:
            reward.close()
            server.close()
        listener.close()
    net, mem, left = scores
    assert net.score == 1.0, net.details  # no route to the host's loopback
    assert mem.score == 0.0, mem.details  # the sandbox's 512 MiB hold for all its processes together
    assert left.score == 1.0, left.details  # it ran, and its escaped child ...
    deadline = time.monotonic() + 15
    while _left_behind() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _left_behind() == []  # ... died with the sandbox


@pytest.mark.slow
def test_a_real_rlvr_code_job_scores_in_the_servers_confined_sandboxes(confined: None) -> None:
    d = scratch_dir("codejob")
    proc = ServerProc(d)
    token = create_token(proc.db_url, "alice")
    proc.start()
    try:
        client = Client(proc.url, token, retries=0)
        cfg = {
            "name": "code", "total_steps": 1, "torch_threads": 1, "model": {"path": "model", "build_tiny": True},
            "rollout": {
                "mode": "rlvr", "eval_episodes": 0, "eval_every": 0, "episode": {"max_tokens_per_turn": 16},
                "scheduler": {"group_size": 2, "num_env_groups": 2},
                "rlvr": {
                    "dataset": {"source": "generator", "generator": "python_functions", "size": 16, "heldout_size": 4},
                    "rewards": {"routes": {"code": {"reward": "code", "options": {"sandboxes": 1, "t_max_s": 5}}}},
                },
            },
            "optim": {"mini_batch_size": 4, "micro_batch_size": 4},
            "logging": {"run_dir": "runs", "tensorboard": False},
        }  # fmt: skip
        job = client.wait_job(client.create_job("train", cfg)["id"], timeout_s=300)
        logs = client.job_logs(job["id"])
        assert job["state"] == "succeeded", (job.get("error"), logs[-2000:])
        assert "sandboxes of this server (isolation confined)" in logs
        client.close()
    finally:
        proc.cleanup()
        shutil.rmtree(d, ignore_errors=True)
