"""The ``rockroll`` command line (typer). Sub-commands of other packages are mounted here."""

from __future__ import annotations

import typer

from rockroll.agentrl.cli import model_app, serve_model_cmd
from rockroll.agentrl.cli_eval import eval_app
from rockroll.api.cli_envs import demo, envs_app, play
from rockroll.api.cli_remote import env_app, job_app, sandbox_app, session_app
from rockroll.api.cli_server import serve, token_app
from rockroll.sandbox.cli import image_app
from rockroll.trainer.cli import register as register_train

__all__ = ["app"]

app = typer.Typer(help="rockroll: text environments, sandboxes and RL training for LLM agents.", no_args_is_help=True)
app.add_typer(envs_app, name="envs")
app.command("play")(play)
app.command("demo")(demo)
app.command("serve")(serve)
app.add_typer(token_app, name="token")
app.add_typer(env_app, name="env")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(session_app, name="session")
app.add_typer(job_app, name="job")
app.add_typer(image_app, name="image")
app.add_typer(model_app, name="model")
app.command("serve-model")(serve_model_cmd)
app.add_typer(eval_app, name="eval")
register_train(app)  # rockroll train / rockroll plot / rockroll export


@app.command()
def version() -> None:
    """Print rockroll's version."""
    from importlib.metadata import version as _version

    typer.echo(_version("rockroll"))


if __name__ == "__main__":  # pragma: no cover
    app()
