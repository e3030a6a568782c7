"""Where the vLLM venv is (``.venv-vllm``, built by ``bash scripts/setup-vllm.sh``) for the vLLM tests.

The build script writes ``.venv-vllm.status``: ``ok``, or ``failed: <why>``. Tests that need the
venv call :func:`vllm_python`, which skips them with that reason where the venv was not built.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
STATUS_FILE = ROOT / ".venv-vllm.status"


def venv_status() -> str:
    """``ok``, the build's failure line, or why there is none."""
    if not STATUS_FILE.is_file():
        return "not built (run: bash scripts/setup-vllm.sh)"
    return STATUS_FILE.read_text().strip() or "empty status file"


def vllm_python() -> str:
    """The vLLM venv's python, or skip the calling test with the reason it is missing."""
    status = venv_status()
    if status != "ok":
        pytest.skip(f"vLLM venv: {status}")
    if not VENV_PYTHON.is_file():
        pytest.skip(f"vLLM venv: {VENV_PYTHON} is missing although the status says ok; rerun scripts/setup-vllm.sh")
    return str(VENV_PYTHON)
