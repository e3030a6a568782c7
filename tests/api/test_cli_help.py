"""Every command of ``api/cli*.py`` and ``sandbox/cli.py`` shows an example in its ``--help``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import typer

from rockroll.api.cli import app
from tests.api.test_cli_errors import rockroll

OWN_MODULES = ("rockroll.api.cli", "rockroll.sandbox.cli")


def _commands(cmd, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths of the leaf commands whose code lives in OWN_MODULES."""
    subs = getattr(cmd, "commands", None)
    if subs:
        return [p for name, sub in sorted(subs.items()) for p in _commands(sub, (*path, name))]
    module = getattr(getattr(cmd.callback, "__wrapped__", cmd.callback), "__module__", "")
    return [path] if module.startswith(OWN_MODULES) else []


def test_every_command_help_has_an_example() -> None:
    paths = _commands(typer.main.get_command(app))
    assert len(paths) >= 30 and ("job", "train") in paths and ("image", "build") in paths
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda p: rockroll(*p, "--help"), paths))
    missing = []
    for path, out in zip(paths, outs, strict=True):
        assert out.returncode == 0, out
        example = f"Example: rockroll {' '.join(path)}"
        if example not in " ".join(out.stdout.split()):
            missing.append(" ".join(path))
    assert not missing, f"no 'Example: rockroll ...' in --help of: {', '.join(missing)}"


def test_root_help_lists_debug_and_version() -> None:
    out = rockroll("--help")
    assert out.returncode == 0 and "--debug" in out.stdout and "--version" in out.stdout
    assert "Example: rockroll play" in out.stdout
