"""``rockroll env|sandbox|session|job`` against a real server (typer's runner, real HTTP)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rockroll.api.server.serve_proc import ServerProc
from rockroll.cli.main import app


@pytest.fixture()
def run(server: ServerProc):
    runner = CliRunner()
    env = {"ROCKROLL_URL": server.url, "ROCKROLL_TOKEN": server.tokens["alice"], "COLUMNS": "200"}

    def invoke(*args: str):
        return runner.invoke(app, list(args), env=env)

    return invoke


def test_env_commands(run) -> None:
    out = run("env", "list", "--tag", "grid")
    assert out.exit_code == 0 and "FrozenLake-v0" in out.output
    out = run("env", "show", "FrozenLake")
    assert out.exit_code == 0 and '"max_steps": 20' in out.output
    out = run("env", "show", "Nope-v0")  # the error reaches rockroll's main (one line: test_cli_errors.py)
    assert out.exit_code == 1 and "env_not_found" in str(out.exception)


def test_sandbox_and_session_commands(run) -> None:
    out = run("sandbox", "create")
    assert out.exit_code == 0, out.output
    sb = out.output.strip()
    assert sb in run("sandbox", "list").output
    out = run("sandbox", "exec", sb, "sh", "-c", "echo from-cli; exit 4")
    assert out.exit_code == 4 and "from-cli" in out.output
    assert run("sandbox", "rm", sb).exit_code == 0
    sid = run("session", "create", "FrozenLake-v0", "is_slippery=false").output.strip()
    assert sid.startswith("se-")
    assert run("session", "reset", sid, "--seed", "1").exit_code == 0
    out = run("session", "step", sid, "Up")
    assert out.exit_code == 0 and "reward=" in out.output
    assert sid in run("session", "list").output
    assert run("session", "rm", sid).exit_code == 0


def test_job_commands(run) -> None:
    job = run("job", "eval", "FrozenLake-v0", "--episodes", "1").output.strip()
    assert job.startswith("job-")
    assert job in run("job", "list").output
    assert run("job", "show", job).exit_code == 0


def test_token_create_cli_rejects_bad_name(tmp_path) -> None:
    out = CliRunner().invoke(app, ["token", "create", "--name", "bad name!", "--db", f"sqlite:///{tmp_path}/t.db"])
    assert out.exit_code == 2


def test_serve_refuses_dev_mode_off_loopback() -> None:
    out = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--dev"])
    assert out.exit_code == 2 and "loopback" in out.output
