"""``rockroll session ...``: env sessions on a rockroll server (create, reset, step, remove)."""

from __future__ import annotations

import typer

from rockroll.cli.envs import _parse_kwargs
from rockroll.cli.remote import TOKEN, URL, _run, _say, _table, console

__all__ = ["session_app"]

session_app = typer.Typer(help="Env sessions on a rockroll server.", no_args_is_help=True)


@session_app.command("list")
def session_list(url: str = URL, token: str = TOKEN) -> None:
    """List your open sessions.

    Example: rockroll session list
    """
    _table(["id", "env", "sandbox_id", "steps", "owner"], _run(url, token, lambda c: c.list_sessions()))


@session_app.command("create")
def session_create(
    env: str,
    kwargs: list[str] = typer.Argument(None, help="key=value constructor args"),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Open a session and print its id.

    Example: rockroll session create FrozenLake-v0 is_slippery=false
    """
    info = _run(url, token, lambda c: c.create_session(env, _parse_kwargs(kwargs or [])))
    console.print(info["id"])


@session_app.command("reset")
def session_reset(session_id: str, seed: int = typer.Option(None), url: str = URL, token: str = TOKEN) -> None:
    """Reset a session and print the observation.

    Example: rockroll session reset se-1a2b3c4d --seed 0
    """
    _say(_run(url, token, lambda c: c.reset(session_id, seed=seed))["observation"])


@session_app.command("step")
def session_step(
    session_id: str,
    action: str,
    raw: bool = typer.Option(False, "--raw", help="Send ACTION as is (an env that takes bare actions)."),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Step with ACTION (wrapped in <answer> tags when it has none, unless --raw).

    Example: rockroll session step se-1a2b3c4d "Left"
    """
    text = action if raw or "<answer>" in action.lower() else f"<answer>{action}</answer>"
    out = _run(url, token, lambda c: c.step(session_id, text))
    _say(out["observation"])
    console.print(f"reward={out['reward']:+.2f} terminated={out['terminated']} truncated={out['truncated']}")


@session_app.command("rm")
def session_rm(session_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Close a session.

    Example: rockroll session rm se-1a2b3c4d
    """
    _run(url, token, lambda c: c.close_session(session_id))
