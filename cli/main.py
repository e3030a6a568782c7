"""The ``rockroll`` command line (typer). Sub-commands of other packages are mounted here.

:func:`main` is the console script: it runs the app with typer's pretty tracebacks off and ends a
user error in one or two lines (:mod:`rockroll.cli.errors`); ``rockroll --debug ...`` (or
``$ROCKROLL_DEBUG=1``) shows the traceback too.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import typer
from typer.exceptions import TyperException

from rockroll.cli.envs import demo, envs_app, play
from rockroll.cli.errors import report
from rockroll.cli.eval import eval_app
from rockroll.cli.image import image_app
from rockroll.cli.job import job_app
from rockroll.cli.model import model_app, serve_model_cmd
from rockroll.cli.remote_env import env_app
from rockroll.cli.sandbox import sandbox_app
from rockroll.cli.server import node, serve
from rockroll.cli.session import session_app
from rockroll.cli.tables import keep_option_names
from rockroll.cli.token import token_app
from rockroll.cli.train import register as register_train

__all__ = ["app", "main"]


class _App(typer.Typer):
    """The root app; calling it with no arguments (an older console script: ``app()``) runs :func:`main`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            return super().__call__(*args, **kwargs)
        main()


app = _App(
    help="rockroll: text environments, sandboxes and RL training for LLM agents.\n\nExample: rockroll play FrozenLake-v0 --policy random",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
_debug = {"on": False}


def _rockroll_version() -> str:
    from importlib.metadata import version as _version

    return _version("rockroll")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(_rockroll_version())
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(
        False, "--debug", envvar="ROCKROLL_DEBUG", help="Show the full traceback when a command fails."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print rockroll's version and exit."
    ),
) -> None:
    """Global options: --debug, --version."""
    _debug["on"] = _debug["on"] or debug


# Local: envs of this machine, training and evaluation runs, the sandbox image, models.
app.command("play")(play)
app.command("demo")(demo)
app.add_typer(envs_app, name="envs")
register_train(app)  # rockroll train / rockroll plot / rockroll export
app.add_typer(eval_app, name="eval")
app.add_typer(image_app, name="image")
app.add_typer(model_app, name="model")
# Servers: the control plane, a node agent, a model (each `serve-*`).
app.command("serve-api")(serve)
app.command("serve-node")(node)
app.command("serve-model")(serve_model_cmd)
app.add_typer(token_app, name="token")
# A control plane's resources, over HTTP (`--url`, `--token`).
app.add_typer(env_app, name="remote-env")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(session_app, name="session")
app.add_typer(job_app, name="job")

# Old spellings, kept working but hidden (README commands and scripts of before): `serve` and `node`
# named no server, `env` was one letter away from the local `envs`.
app.command("serve", hidden=True)(serve)
app.command("node", hidden=True)(node)
app.add_typer(env_app, name="env", hidden=True)


@app.command()
def version() -> None:
    """Print rockroll's version (same as `rockroll --version`).

    Example: rockroll version
    """
    typer.echo(_rockroll_version())


def _show_cause(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback``, printing with --debug the traceback of an error a command caught and turned into an exit."""

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except (typer.Exit, TyperException) as e:
            if _debug["on"] and e.__cause__ is not None:
                traceback.print_exception(e.__cause__)
            raise

    return run


def _wrap_commands(cmd: Any) -> None:
    if cmd.callback is not None:
        cmd.callback = _show_cause(cmd.callback)
    for sub in getattr(cmd, "commands", {}).values():
        _wrap_commands(sub)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run ``rockroll`` with ``argv`` (default: the process's) and exit with its status."""
    args = list(sys.argv[1:] if argv is None else argv)
    leading = args[: next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))]
    # set here too: a usage error of the root (an unknown command) comes before the root callback runs
    _debug["on"] = "--debug" in leading or os.environ.get("ROCKROLL_DEBUG", "").lower() in ("1", "true", "yes")
    try:  # building the command reads every signature: an interrupt may come that early (a quick ^C)
        keep_option_names()  # --help at 80 columns: option names whole, long defaults folded
        cmd = typer.main.get_command(app)
        _wrap_commands(cmd)
        rv = cmd.main(args=args, prog_name="rockroll", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except Exception as e:  # noqa: BLE001 - every error ends here: one or two lines, or a bug's traceback
        code = report(e, debug=_debug["on"])
    except KeyboardInterrupt as e:
        code = report(e, debug=_debug["on"])
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
