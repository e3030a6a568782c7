"""User errors end in one or two lines and a non-zero exit; ``rockroll --debug`` shows the traceback.

Every case runs the installed ``rockroll`` console script as a subprocess, as a user would.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rockroll.api.server.serve_proc import ServerProc
from rockroll.cli.errors import describe

ROOT = Path(__file__).resolve().parents[2]
ROCKROLL = str(Path(sys.executable).parent / "rockroll")


def rockroll(*args: str, cwd: Path = ROOT, timeout: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the console script (no server URL or token from the caller's environment)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ROCKROLL_")}
    return subprocess.run(
        [ROCKROLL, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, "COLUMNS": "200", **env},
        timeout=timeout,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_short(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Non-zero exit, at most 3 lines on stderr naming the problem, no traceback anywhere."""
    lines = out.stderr.strip().splitlines()
    assert out.returncode != 0, out
    assert 1 <= len(lines) <= 3, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    for needle in needles:
        assert needle in out.stderr, out.stderr


def assert_debug_traceback(args: list[str], **env: str) -> None:
    out = rockroll("--debug", *args, **env)
    assert out.returncode != 0
    assert "Traceback (most recent call last)" in out.stderr, out.stderr


@pytest.fixture(scope="module")
def listening_port() -> Iterator[int]:
    """A loopback port something already listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


# case -> (args, words the short message must contain, whether an exception lies behind it for --debug).
# `rockroll train` (cli/train.py) checks its config path and run folder before anything raises: no traceback.
LOCAL_CASES = {
    "missing config (train)": (["train", "no-such-config.yaml"], ["no-such-config.yaml"], False),
    "missing config (job train)": (["job", "train", "no-such-config.yaml"], ["no-such-config.yaml", "not found"], True),
    "unknown env id": (["play", "Nope-v0"], ["Nope-v0", "rockroll envs list"], True),
    "unknown env id (envs show)": (["envs", "show", "FrozenLak-v0"], ["FrozenLake-v0"], True),
    "bad override (train)": (["train", "configs/frozenlake_tiny.yaml", "optim.lrr=1"], ["optim.lrr", "optim.lr"], True),
    "bad override (play)": (["play", "FrozenLake-v0", "is_slipery=false"], ["is_slipery", "is_slippery"], True),
    "bad key=value": (["play", "FrozenLake-v0", "notkv"], ["key=value", "--help"], True),
    "unknown command": (["plya"], ["plya"], True),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(LOCAL_CASES))
def test_local_user_error_is_short(case: str) -> None:
    args, needles, raised = LOCAL_CASES[case]
    assert_short(rockroll(*args), *needles)
    if raised:
        assert_debug_traceback(args)


@pytest.mark.slow
def test_server_down_is_short() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    for args in (["env", "list", "--url", url], ["job", "train", "total_steps=1", "--url", url]):
        assert_short(rockroll(*args), "cannot reach", url, "rockroll serve")
        assert_debug_traceback(args)


def test_port_in_use_is_short(listening_port: int, tmp_path: Path) -> None:
    args = ["serve", "--port", str(listening_port), "--db", f"sqlite:///{tmp_path}/r.db", "--no-dev"]
    args += ["--sandbox-state-dir", str(tmp_path / "sb")]
    out = rockroll(*args)
    assert_short(out, f"127.0.0.1:{listening_port}", "in use", "--port")
    assert_debug_traceback(args)


def test_run_that_exists_is_short(tmp_path: Path) -> None:
    """A run name whose folder holds output refuses to start (before loading anything) and says what to do."""
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "metrics.jsonl").write_text("{}\n")
    assert_short(rockroll("train", "name=demo", f"logging.run_dir={tmp_path}"), "demo", "exists", "--resume")
    assert_short(rockroll("train", "name=ghost", f"logging.run_dir={tmp_path}", "--resume"), "ghost")


def test_run_exists_error_maps_to_one_line() -> None:
    """Raised rather than checked (the jobs API, a script), a run that exists still prints its message."""
    found = describe(FileExistsError("run runs/demo exists: pass --resume to continue it or --overwrite"))
    assert found is not None and "--overwrite" in found.message and found.code != 0


@pytest.mark.slow
def test_bad_token_and_bad_job_config_are_short(server: ServerProc, tmp_path: Path) -> None:
    url = server.url
    args = ["env", "list", "--url", url, "--token", "not-a-token"]
    assert_short(rockroll(*args), "401", "--token", "ROCKROLL_TOKEN")
    assert_debug_traceback(args)
    cfg = tmp_path / "train.yaml"
    cfg.write_text("total_steps: 1\noptim: {lrr: 1.0}\n")
    args = ["job", "train", str(cfg), "--url", url]
    assert_short(rockroll(*args, ROCKROLL_TOKEN=server.tokens["alice"]), "invalid_job", "optim.lrr")


def test_version_flag_and_command() -> None:
    from importlib.metadata import version

    for args in (["--version"], ["version"]):
        out = rockroll(*args)
        assert out.returncode == 0 and out.stdout.strip() == version("rockroll"), out


def test_a_bug_keeps_its_traceback() -> None:
    """Anything that is not a known user error is a bug: its traceback shows without --debug."""
    code = (
        "import sys; import rockroll.cli.main as cli\n"
        "@cli.app.command('boom')\n"
        "def boom() -> None:\n"
        "    raise ZeroDivisionError('boom')\n"
        "cli.main(['boom'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 1
    assert "Traceback (most recent call last)" in out.stderr and "ZeroDivisionError: boom" in out.stderr
    assert "bug" in out.stderr.splitlines()[-1]
