"""The type check's own pieces (scripts/typecheck.py): the counts, and a [tool.mypy] that names real modules.

mypy itself runs in scripts/test.sh before pytest (it takes longer than a unit test should).
"""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _typecheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "scripts" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _overrides() -> list[dict[str, object]]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["tool"]["mypy"]["overrides"])


def _modules(override: dict[str, object]) -> list[str]:
    module = override["module"]
    assert isinstance(module, (str, list))
    return [module] if isinstance(module, str) else [str(m) for m in module]


def _file_of(module: str, dirs: dict[str, str]) -> Path | None:
    for package, folder in dirs.items():
        if module == package or module.startswith(package + "."):
            rest = module.removeprefix(package).lstrip(".").split(".") if module != package else []
            base = ROOT / folder / Path(*rest) if rest else ROOT / folder
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    return candidate
    return None


def test_counts_read_tokens_not_text() -> None:
    source = (
        "from typing import Any\n"
        '"""Any in a docstring does not count."""\n'
        "x: dict[str, Any] = {}  # Any in a comment does not count\n"
        "y = f(x)  # type: ignore[arg-type]\n"
        "z = g(x)  # type:ignore\n"
        "AnyOther = 1\n"
    )
    assert _typecheck().count_tokens(source) == (2, 2)


def test_every_listed_module_exists() -> None:
    """A module renamed or deleted must leave [tool.mypy] too (the debt list stays the tree's)."""
    dirs = _typecheck().package_dirs()
    listed = [m for o in _overrides() for m in _modules(o) if m.startswith("rockroll.")]
    assert listed
    missing = [m for m in listed if _file_of(m, dirs) is None]
    assert not missing, f"[tool.mypy] names modules that do not exist: {missing}"


def test_contracts_are_strict_and_not_in_the_debt_list() -> None:
    strict = [m for o in _overrides() if o.get("disallow_untyped_defs") for m in _modules(o)]
    debt = {m for o in _overrides() if o.get("ignore_errors") for m in _modules(o)}
    assert "rockroll.envs.core" in strict and "rockroll.sandbox.base" in strict
    assert not debt & set(strict)
