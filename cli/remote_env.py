"""``rockroll remote-env ...``: envs on a rockroll server (list, show, register custom ones, remove)."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from rockroll.cli.envs import _parse_kwargs
from rockroll.cli.remote import TOKEN, URL, _run, _table, console

__all__ = ["env_app"]

env_app = typer.Typer(help="Envs on a rockroll server (register custom ones).", no_args_is_help=True)


@env_app.command("list")
def env_list(
    tag: str = typer.Option(None, help="Only envs with this tag."), url: str = URL, token: str = TOKEN
) -> None:
    """List envs (built-in and custom).

    Example: rockroll remote-env list --tag grid --url http://127.0.0.1:8080
    """
    cols = ["id", "kind", "owner", "visibility", "max_steps", "tags", "description"]
    _table(cols, _run(url, token, lambda c: c.list_envs(tag)))


@env_app.command("show")
def env_show(name: str, url: str = URL, token: str = TOKEN) -> None:
    """Show one env's spec as JSON.

    Example: rockroll remote-env show FrozenLake-v0
    """
    console.print_json(data=_run(url, token, lambda c: c.get_env(name)))


@env_app.command("register")
def env_register(
    env_id: str = typer.Argument(..., help="Versioned id, e.g. Maze-v0 (stored as <your token name>/Maze-v0)."),
    entry_point: str = typer.Option(..., help="'module:Class' inside the sandbox."),
    source: str = typer.Option(None, help="A .py module or .whl to upload (kind 'source')."),
    image: str = typer.Option(None, help="Docker image running the in-sandbox server (kind 'image')."),
    kwargs: list[str] = typer.Option(None, "--kwarg", help="key=value default constructor args."),
    max_steps: int = typer.Option(None, help="Default step limit."),
    tag: list[str] = typer.Option(None, "--tag", help="Tags (repeat)."),
    description: str = typer.Option("", help="One line for listings."),
    public: bool = typer.Option(False, "--public", help="Share it: every owner sees and uses it (default private)."),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Register a custom env in your namespace; the server plays reset + one step of it in a sandbox first.

    Example: rockroll remote-env register Maze-v0 --entry-point maze:MazeEnv --source maze.py --max-steps 30
    (alice's token registers alice/Maze-v0; add --public to share it)
    """
    kind = "source" if source else "image" if image else "entry_point"
    fields: dict[str, Any] = {"kwargs": _parse_kwargs(kwargs or []), "tags": tag or [], "description": description}
    fields["visibility"] = "public" if public else "private"
    if max_steps is not None:
        fields["max_steps"] = max_steps
    if image:
        fields["image"] = image
    view = _run(
        url, token, lambda c: c.register_env(env_id, kind=kind, entry_point=entry_point, source=source, **fields)
    )
    console.print(
        f"registered [bold]{escape(view['id'])}[/bold] ({kind}) owner={escape(view['owner'])} "
        f"visibility={escape(str(view.get('visibility', 'private')))}"
    )


@env_app.command("rm")
def env_rm(name: str, url: str = URL, token: str = TOKEN) -> None:
    """Delete a custom env.

    Example: rockroll remote-env rm alice/Maze-v0
    """
    _run(url, token, lambda c: c.delete_env(name))
