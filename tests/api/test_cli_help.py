"""Every command of ``cli/`` (but eval, model, train and their kin) shows an example in its ``--help``;
the old spellings (hidden aliases) still run."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import typer

from rockroll.cli.main import app
from tests.api.test_cli_errors import rockroll

OWN_MODULES = (
    "rockroll.cli.main",
    "rockroll.cli.envs",
    "rockroll.cli.remote",
    "rockroll.cli.sandbox",
    "rockroll.cli.session",
    "rockroll.cli.job",
    "rockroll.cli.server",
    "rockroll.cli.token",
    "rockroll.cli.image",
)


def _commands(cmd, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths of the visible leaf commands whose code lives in OWN_MODULES (hidden aliases left out)."""
    if getattr(cmd, "hidden", False):
        return []
    subs = getattr(cmd, "commands", None)
    if subs:
        return [p for name, sub in sorted(subs.items()) for p in _commands(sub, (*path, name))]
    module = getattr(getattr(cmd.callback, "__wrapped__", cmd.callback), "__module__", "")
    return [path] if module.startswith(OWN_MODULES) else []


@pytest.mark.slow
def test_every_command_help_has_an_example() -> None:
    paths = _commands(typer.main.get_command(app))
    assert len(paths) >= 30 and ("job", "submit-train") in paths and ("image", "build") in paths
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


def test_old_spellings_are_hidden_aliases() -> None:
    """``serve``, ``node``, ``env`` and ``job train|eval`` run the renamed commands and stay out of --help."""
    root = typer.main.get_command(app)
    aliases = {("serve",): ("serve-api",), ("node",): ("serve-node",), ("env",): ("remote-env",)}
    aliases |= {("job", "train"): ("job", "submit-train"), ("job", "eval"): ("job", "submit-eval")}

    def find(path: tuple[str, ...]):
        cmd = root
        for name in path:
            cmd = cmd.commands[name]
        return cmd

    for old, new in aliases.items():
        old_cmd, new_cmd = find(old), find(new)
        assert old_cmd.hidden and not new_cmd.hidden, old
        if old_cmd.callback is not None:
            unwrap = lambda cb: getattr(cb, "__wrapped__", cb)  # noqa: E731 - typer wraps each callback
            assert unwrap(old_cmd.callback) is unwrap(new_cmd.callback), old
        else:
            assert set(old_cmd.commands) == set(new_cmd.commands), old
    listed = rockroll("--help").stdout
    assert "serve-api" in listed and "remote-env" in listed
    assert not any(f"│ {name} " in listed for name in ("serve", "node", "env")), "an old spelling is listed"
