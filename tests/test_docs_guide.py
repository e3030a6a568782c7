"""The docs' "Write your own environment" guide (docs/guide.md) runs as written: its code blocks are the files
of a fresh project, played locally, registered through a real server (sandboxes) and trained on; its
commands (``# run:`` blocks) train and evaluate the server's env, as a run and as jobs, and serve the result.

The one change to a command: the addresses. The guide's servers listen on 127.0.0.1:8080 (the control
plane) and 127.0.0.1:8001 (the model); the test's listen on free ports.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide.md"
API_URL = "http://127.0.0.1:8080"  # the control plane of the guide's commands
MODEL_PORT = "8001"  # the port of the guide's `rockroll serve-model`


def _section() -> str:
    return GUIDE.read_text()


def guide_files() -> dict[str, str]:
    """``# file: NAME`` code blocks of the guide, by name, in order."""
    files = {}
    for block in re.findall(r"```python\n(.*?)```", _section(), re.DOTALL):
        first, _, _ = block.partition("\n")
        match = re.fullmatch(r"# file: (\S+)", first.strip())
        assert match, f"every code block of the guide names its file on its first line, not {first!r}"
        files[match.group(1)] = block
    return files


def guide_commands() -> list[str]:
    """The guide's ``bash`` blocks, in order: each says where it runs on its first line (``# run: ...``)."""
    blocks = re.findall(r"```bash\n(.*?)```", _section(), re.DOTALL)
    for block in blocks:
        first, _, _ = block.partition("\n")
        assert first.startswith("# run: "), f"every command block of the guide starts with '# run: ', not {first!r}"
    return blocks


def _project(tmp_path: Path) -> Path:
    for name, code in guide_files().items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    (tmp_path / "my_envs" / "__init__.py").write_text("")
    return tmp_path


def _run(project: Path, script: str, timeout: float, **env: str) -> str:
    out = subprocess.run(
        [sys.executable, script], cwd=project, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(project), **env},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _at(block: str, replacements: dict[str, str]) -> str:
    """``block`` with the guide's addresses made the test's (each must be in it: the guide and the test agree)."""
    for old, new in replacements.items():
        assert old in block, f"the guide's command block no longer holds {old!r}:\n{block}"
        block = block.replace(old, new)
    return block


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_group(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Stop ``proc`` and every process left in its group (a server in the background): SIGTERM, then
    SIGKILL for what outlives ``timeout``; return once none is left."""
    deadline = time.monotonic() + timeout
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    while time.monotonic() < deadline + 10:  # then only zombies no one reaps could be left
        proc.poll()  # reaped: a finished shell no longer counts as one of the group
        try:
            os.killpg(proc.pid, signal.SIGKILL if time.monotonic() > deadline else 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def _bash(project: Path, block: str, timeout: float, log: Path) -> str:
    """Run a command block as one ``bash -e`` script in ``project`` (``rockroll`` of this interpreter first on
    PATH, no token or URL of the caller's); return its output. What it left running is stopped on return."""
    env = {k: v for k, v in os.environ.items() if k not in ("ROCKROLL_URL", "ROCKROLL_TOKEN", "ROCKROLL_MODEL_API_KEY")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    with log.open("w") as out:  # a file, not a pipe: a server left in the background keeps a pipe open
        proc = subprocess.Popen(
            ["bash", "-e", "-o", "pipefail", "-c", block], cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _stop_group(proc)
    text = log.read_text()
    assert code == 0, f"exit {code} (None: past {timeout:.0f} s) of\n{block}\n--- output:\n{text[-5000:]}"
    return text


def test_guide_blocks_are_files_or_commands() -> None:
    """Every fenced block of the page is a ``python`` file or a ``bash`` command block, so each one is written or
    run by the tests below; none escapes them under another language tag."""
    tags = re.findall(r"^```(\S*)$", _section(), re.MULTILINE)[::2]  # opening fences (every other fence line)
    assert tags and set(tags) <= {"python", "bash"}, tags
    assert len(tags) == len(guide_files()) + len(guide_commands())


def test_guide_blocks_are_the_files_it_names() -> None:
    assert list(guide_files()) == ["my_envs/guess.py", "play.py", "remote.py", "train.py"]
    env_lines = [ln for ln in guide_files()["my_envs/guess.py"].splitlines() if ln.strip()]
    assert len(env_lines) <= 40  # "a 30-line env" (plus its expert)
    train, serve = guide_commands()  # step 5, step 6
    assert API_URL in train and f"--port {MODEL_PORT}" in serve and f"127.0.0.1:{MODEL_PORT}/v1" in serve


def test_guide_env_plays_locally(tmp_path: Path) -> None:
    out = _run(_project(tmp_path), "play.py", 120)
    assert "success: True" in out


def test_guide_env_registers_and_runs_in_a_sandbox(tmp_path: Path) -> None:
    from rockroll.api.server.serve_proc import ServerProc

    project = _project(tmp_path)
    data = Path(tempfile.mkdtemp(prefix="rr-guide-"))  # short: sandbox socket paths must fit in 107 bytes
    server = ServerProc(data, backend="process", dev=True)
    try:
        url = server.start()
        out = _run(project, "remote.py", 180, ROCKROLL_URL=url)
    finally:
        server.stop(kill_sandboxes=True)
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)
    assert "The number is between" in out
    assert "registered dev/Guess-v0 private" in out  # custom envs land in their owner's namespace


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_guide_runs_the_whole_loop(tmp_path: Path) -> None:
    """Steps 3-6 in order: register on a real server, train locally, train and evaluate the server's env
    (a run, then jobs), serve the run's export and ask it for the first guess."""
    pytest.importorskip("torch")
    if shutil.which("curl") is None:
        pytest.skip("step 6 asks the model server with curl")
    from rockroll.api.server.serve_proc import ServerProc

    project = _project(tmp_path / "guide")
    train_block, serve_block = guide_commands()
    data = Path(tempfile.mkdtemp(prefix="rr-guide-"))  # short: sandbox socket paths must fit in 107 bytes
    server = ServerProc(data, backend="process", dev=True)
    try:
        url = server.start()
        # 3. register it on the server
        assert "registered dev/Guess-v0 private" in _run(project, "remote.py", 180, ROCKROLL_URL=url)

        # 4. train on it locally (warm start + GRPO), exported
        out = _run(project, "train.py", 900)
        match = re.search(r"held-out success (\d+)% -> (\d+)%", out)
        assert match, out[-2000:]
        assert int(match.group(2)) >= 50  # the warm start on binary search already finds most numbers
        assert (project / "runs" / "guess" / "export" / "final" / "config.json").exists()

        # 5. train on the server's env from that policy, evaluate it, then the same as jobs on the server
        out = _bash(project, _at(train_block, {API_URL: url}), 1500, tmp_path / "step5.log")
        assert (project / "runs" / "guess-remote" / "export" / "final" / "config.json").exists()
        summary = json.loads(next(ln for ln in out.splitlines() if ln.startswith('{"success_start"')))
        assert summary["steps"] == 2 and summary["success_end"] >= 0.5, summary
        rate = re.search(r"\| all \| 20 \| 0 \| (\d+(?:\.\d+)?)% \|", out)  # rockroll eval: 20 episodes, none masked
        assert rate, out[-5000:]
        assert float(rate.group(1)) >= 50  # the trained policy, played through the server's sessions
        assert out.count("job succeeded") == 2  # the train job, then the eval job
        job_exports = list((data / "jobs").glob("*/runs/guess-job/export/final/config.json"))
        assert len(job_exports) == 1, sorted(p.relative_to(data) for p in (data / "jobs").rglob("export"))
        assert len(re.findall(r"dev/Guess-v0/\d+: success=(?:True|False)", out)) == 10  # the eval job's episodes
        assert re.search(r"eval/episodes\s+\S\s+10\.00", out), out[-3000:]

        # 6. serve the run's export and ask for the trainer's turn
        port = str(_free_port())
        block = _at(
            serve_block, {f"--port {MODEL_PORT}": f"--port {port}", f"127.0.0.1:{MODEL_PORT}/": f"127.0.0.1:{port}/"}
        )
        out = _bash(project, block, 600, tmp_path / "step6.log")
        assert "as trained (rockroll_episode.json" in out  # the server read the export's episode settings
        answer = json.loads(next(ln for ln in out.splitlines() if '"chat.completion"' in ln))
        choice = answer["choices"][0]
        assert re.fullmatch(r"<answer>[1-8]</answer>", choice["message"]["content"]), answer
        assert choice["finish_reason"] == "stop", answer  # the end of the turn, not the token cap
        trained = json.loads((project / "runs/guess-remote/export/final/rockroll_episode.json").read_text())
        assert 0 < answer["usage"]["completion_tokens"] <= trained["max_tokens_per_turn"], answer
    finally:
        server.stop(kill_sandboxes=True)
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)
