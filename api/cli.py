"""The ``rockroll`` command line (typer). Sub-commands of other packages are mounted here."""

from __future__ import annotations

import typer

from api.cli_envs import demo, envs_app, play
from sandbox.cli import image_app

__all__ = ["app"]

app = typer.Typer(help="rockroll: text environments, sandboxes and RL training for LLM agents.", no_args_is_help=True)
app.add_typer(envs_app, name="envs")
app.command("play")(play)
app.command("demo")(demo)
app.add_typer(image_app, name="image")


@app.command()
def version() -> None:
    """Print rockroll's version."""
    from importlib.metadata import version as _version

    typer.echo(_version("rockroll"))


if __name__ == "__main__":  # pragma: no cover
    app()
