"""The README's "Write your own environment" guide runs as written: its code blocks are the files
of a fresh project, played locally, registered through a real server (sandboxes) and trained on."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## Write your own environment"


def guide_files() -> dict[str, str]:
    """``# file: NAME`` code blocks of the guide, by name, in order."""
    text = README.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    blocks = re.findall(r"```python\n(.*?)```", text[start:end], re.DOTALL)
    files = {}
    for block in blocks:
        first, _, _ = block.partition("\n")
        match = re.fullmatch(r"# file: (\S+)", first.strip())
        assert match, f"every code block of the guide names its file on its first line, not {first!r}"
        files[match.group(1)] = block
    return files


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


def test_guide_blocks_are_the_files_it_names() -> None:
    assert list(guide_files()) == ["my_envs/guess.py", "play.py", "remote.py", "train.py"]
    env_lines = [ln for ln in guide_files()["my_envs/guess.py"].splitlines() if ln.strip()]
    assert len(env_lines) <= 40  # "a 30-line env" (plus its expert)


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
def test_guide_trains_on_the_env(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    project = _project(tmp_path)
    out = _run(project, "train.py", 900)
    match = re.search(r"held-out success (\d+)% -> (\d+)%", out)
    assert match, out[-2000:]
    assert int(match.group(2)) >= 50  # the warm start on binary search already finds most numbers
    assert (project / "runs" / "guess" / "export" / "final" / "config.json").exists()
