"""scripts/dupcheck.py: pylint's duplicate-code check with the settings of pyproject.toml (15 equal lines fail;
imports, docstrings, comments and signatures are not compared)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BODY = "\n".join(f"    x{i} = a * {i} + b" for i in range(15))


def _check(folder: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("pylint")
    cmd = [sys.executable, str(ROOT / "scripts" / "dupcheck.py"), str(folder)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_repeated_block_fails_and_is_shown(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / f"{name}.py").write_text(f"def {name}(a, b):\n{BODY}\n    return x0\n")
    out = _check(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "one.py:[1:17]" in out.stdout and "two.py:[1:17]" in out.stdout


def test_imports_docstrings_comments_and_signatures_do_not_count(tmp_path: Path) -> None:
    """Each part alone is 16 equal lines: without its setting, each would fail the check."""
    imports = "\n".join(f"import mod{i}" for i in range(16))
    doc = '"""' + "\n".join(f"line {i}" for i in range(16)) + '\n"""'
    comments = "\n".join(f"# comment {i}" for i in range(16))
    for name in ("one", "two"):
        sig = f"def {name}(\n" + "".join(f"    arg{i}: int,\n" for i in range(16)) + ") -> None:\n    return None\n"
        (tmp_path / f"{name}.py").write_text(f"{doc}\nx = '{name}'\n{imports}\nx = '{name}'\n{comments}\n{sig}")
    out = _check(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
