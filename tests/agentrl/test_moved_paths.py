"""The old flat module paths of agentrl still import until 0.3: with a warning, as the very same modules."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rockroll.agentrl as agentrl
from rockroll.agentrl._moved import MOVED, REMOVED_IN

ROOT = Path(__file__).resolve().parents[2]
#: what may still name the old paths: the aliases, this test, and the README and docs site (rewritten on their own)
NOT_SCANNED = {"agentrl/_moved.py", "tests/agentrl/test_moved_paths.py"}
#: the docs may name an old path (the page on the move does); measurement records name the tests that import them
NOT_SCANNED_DIRS = ("docs/", "bench/results/")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".cfg", ".txt", ".json", ""}


@pytest.fixture
def forget_old_paths():
    """Drop the old names from ``sys.modules`` (and the package attributes), before and after a test."""

    def forget() -> None:
        for old in MOVED:
            sys.modules.pop(old, None)
            parent, _, child = old.rpartition(".")
            if parent == agentrl.__name__ and getattr(agentrl, child, None) is not None:
                delattr(agentrl, child)

    forget()
    yield
    forget()


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_warns_and_is_the_new_module(old: str, forget_old_paths: None) -> None:
    new = MOVED[old]
    with pytest.warns(DeprecationWarning, match=rf"{re.escape(old)} moved to {re.escape(new)}; .* {REMOVED_IN}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert sys.modules[old] is sys.modules[new]
    assert module.__name__ == new
    assert module.__spec__ is not None and module.__spec__.name == new  # the alias leaves the module's spec alone


def test_old_names_give_identical_classes(forget_old_paths: None) -> None:
    with pytest.warns(DeprecationWarning):
        from rockroll.agentrl.env_source import LocalSource as Old  # the old path on purpose
    from rockroll.agentrl.sources.kinds import LocalSource

    assert Old is LocalSource


def test_packages_keep_the_names_of_the_modules_they_replace() -> None:
    """``faults`` and ``eval`` were modules; their packages re-export those names (no warning)."""
    from rockroll.agentrl.eval import run_eval
    from rockroll.agentrl.eval.run import run_eval as run_eval_now
    from rockroll.agentrl.faults import FaultyEnv
    from rockroll.agentrl.faults.envs import FaultyEnv as FaultyEnvNow

    assert FaultyEnv is FaultyEnvNow and run_eval is run_eval_now


def test_unknown_names_still_fail() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rockroll.agentrl.no_such_module")
    with pytest.raises(AttributeError):
        _ = importlib.import_module("rockroll.agentrl.faults").no_such_name


def test_eval_config_does_not_import_the_rollout() -> None:
    code = (
        "import sys, rockroll.agentrl.eval.config\n"
        "print(sorted(m for m in sys.modules if m.startswith('rockroll.agentrl.') and"
        " m.split('.')[2] in ('rollout', 'serving') or m == 'rockroll.agentrl.eval.run'))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = proc.stdout.strip().splitlines()[-1]
    # eval.config reads the episode settings of rollout.config, and nothing else of the rollout
    assert loaded == "['rockroll.agentrl.rollout', 'rockroll.agentrl.rollout.config']", loaded


def test_every_module_imports_without_an_old_path() -> None:
    """Importing every agentrl module (subprocess, DeprecationWarning as an error) uses no old path."""
    code = (
        "import importlib, pkgutil, rockroll.agentrl as a\n"
        "for m in pkgutil.walk_packages(a.__path__, 'rockroll.agentrl.'): importlib.import_module(m.name)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _scanned_files() -> list[Path]:
    """The tree's text files that git sees (tracked, or new and not ignored): no build output, no venv."""
    proc = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    if proc.returncode != 0:
        pytest.skip("not a git checkout")
    out = []
    for rel in sorted(set(proc.stdout.decode().split("\0")) - {""}):
        path = ROOT / rel
        if rel in NOT_SCANNED or rel.startswith(NOT_SCANNED_DIRS) or path.suffix not in TEXT_SUFFIXES:
            continue
        if path.is_file():  # a file deleted but not yet staged is listed too
            out.append(path)
    return out


def test_the_tree_names_no_old_path() -> None:
    """No import, dotted string, patch target or file path in the tree names an old module."""
    olds = sorted((old.rpartition(".")[2] for old in MOVED), key=len, reverse=True)
    alternatives = "|".join(map(re.escape, olds))
    dotted = re.compile(rf"\brockroll\.agentrl\.({alternatives})\b")
    paths = re.compile(rf"\bagentrl/({alternatives}|faults|eval)\.py\b")
    stale = []
    for path in _scanned_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if dotted.search(line) or paths.search(line):
                stale.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()[:160]}")
    assert not stale, "old agentrl paths (the new ones: rockroll.agentrl._moved.MOVED):\n" + "\n".join(stale)
