"""The eight top-level folders install as one namespace, ``rockroll.*``, and nothing else."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP = ("envs", "envhub", "sandbox", "client", "agentrl", "trainer", "api", "cli")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_listed() -> None:
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = {
        "rockroll." + ".".join(init.parent.relative_to(ROOT).parts)
        for top in TOP
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - found == set(), "these are listed but have no __init__.py"


def test_package_dirs_map_the_top_level_folders() -> None:
    assert _pyproject()["tool"]["setuptools"]["package-dir"] == {f"rockroll.{t}": t for t in TOP}


@pytest.mark.parametrize("top", TOP)
def test_bare_import_refuses_a_second_copy(top: str) -> None:
    """``import envs`` from a checkout would load every class twice: it fails and names the fix."""
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); import {top}"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"import rockroll.{top}, not {top}" in proc.stderr


def test_namespace_import_is_one_copy() -> None:
    import rockroll.envhub as hub
    from rockroll.envs.frozenlake import FrozenLakeEnv

    env = hub.make("FrozenLake-v0")
    assert isinstance(env.unwrapped, FrozenLakeEnv)
    assert not any(name in sys.modules for name in TOP)
