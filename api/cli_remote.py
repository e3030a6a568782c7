"""``rockroll env|sandbox|session|job ...``: the control plane from the shell, over :class:`rockroll.api.client.Client`.

The server URL and token come from ``--url``/``--token`` or ``$ROCKROLL_URL``/``$ROCKROLL_TOKEN``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from rockroll.api.cli_envs import _parse_kwargs

__all__ = ["env_app", "sandbox_app", "session_app", "job_app"]

console = Console()
err = Console(stderr=True)
URL = typer.Option("http://127.0.0.1:8080", "--url", envvar="ROCKROLL_URL", help="Server URL.")
TOKEN = typer.Option("", "--token", envvar="ROCKROLL_TOKEN", help="Bearer token.")

env_app = typer.Typer(help="Envs on a rockroll server (register custom ones).", no_args_is_help=True)
sandbox_app = typer.Typer(help="Sandboxes on a rockroll server.", no_args_is_help=True)
session_app = typer.Typer(help="Env sessions on a rockroll server.", no_args_is_help=True)
job_app = typer.Typer(help="Train/eval jobs on a rockroll server.", no_args_is_help=True)


def _run(url: str, token: str, fn: Callable[[Any], Any]) -> Any:
    """Call ``fn(client)``; print API errors readably and exit 1."""
    import httpx

    from rockroll.api.client import ApiClientError, Client

    with Client(url, token or None, retries=1) as c:
        try:
            return fn(c)
        except ApiClientError as e:
            err.print(f"[red]error {e.status} {e.code}:[/red] {e.message}")
            raise typer.Exit(1) from e
        except httpx.HTTPError as e:
            err.print(f"[red]cannot reach {url}:[/red] {e}")
            raise typer.Exit(1) from e


def _table(columns: list[str], rows: list[dict[str, Any]]) -> None:
    table = Table(*columns)
    for row in rows:
        table.add_row(*[_cell(row.get(c)) for c in columns])
    console.print(table)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v))
    if isinstance(v, dict):
        return json.dumps(v)
    return "" if v is None else str(v)


# ------------------------------------------------------------------- envs
@env_app.command("list")
def env_list(
    tag: str = typer.Option(None, help="Only envs with this tag."), url: str = URL, token: str = TOKEN
) -> None:
    """List envs (built-in and custom)."""
    _table(["id", "kind", "owner", "max_steps", "tags", "description"], _run(url, token, lambda c: c.list_envs(tag)))


@env_app.command("show")
def env_show(name: str, url: str = URL, token: str = TOKEN) -> None:
    """Show one env's spec as JSON."""
    console.print_json(data=_run(url, token, lambda c: c.get_env(name)))


@env_app.command("register")
def env_register(
    env_id: str = typer.Argument(..., help="Versioned id, e.g. Maze-v0."),
    entry_point: str = typer.Option(..., help="'module:Class' inside the sandbox."),
    source: str = typer.Option(None, help="A .py module or .whl to upload (kind 'source')."),
    image: str = typer.Option(None, help="Docker image running the in-sandbox server (kind 'image')."),
    kwargs: list[str] = typer.Option(None, "--kwarg", help="key=value default constructor args."),
    max_steps: int = typer.Option(None, help="Default step limit."),
    tag: list[str] = typer.Option(None, "--tag", help="Tags (repeat)."),
    description: str = typer.Option("", help="One line for listings."),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Register a custom env; the server plays reset + one step of it in a sandbox first."""
    kind = "source" if source else "image" if image else "entry_point"
    fields: dict[str, Any] = {"kwargs": _parse_kwargs(kwargs or []), "tags": tag or [], "description": description}
    if max_steps is not None:
        fields["max_steps"] = max_steps
    if image:
        fields["image"] = image
    view = _run(
        url, token, lambda c: c.register_env(env_id, kind=kind, entry_point=entry_point, source=source, **fields)
    )
    console.print(f"registered [bold]{view['id']}[/bold] ({kind}) owner={view['owner']}")


@env_app.command("rm")
def env_rm(name: str, url: str = URL, token: str = TOKEN) -> None:
    """Delete a custom env."""
    _run(url, token, lambda c: c.delete_env(name))


# -------------------------------------------------------------- sandboxes
_SB_COLS = ["id", "state", "pool", "owner", "uptime_s", "restarts", "sessions", "cpu_seconds", "memory_bytes"]


@sandbox_app.command("list")
def sandbox_list(url: str = URL, token: str = TOKEN) -> None:
    """List your sandboxes (admins: all)."""
    _table(_SB_COLS, _run(url, token, lambda c: c.list_sandboxes()))


@sandbox_app.command("create")
def sandbox_create(
    cpus: float = typer.Option(1.0),
    memory_mb: int = typer.Option(512),
    network: bool = typer.Option(False),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Start a sandbox and print its id."""
    sb = _run(url, token, lambda c: c.create_sandbox(cpus=cpus, memory_mb=memory_mb, network=network))
    console.print(sb["id"])


@sandbox_app.command("rm")
def sandbox_rm(sandbox_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Delete a sandbox."""
    _run(url, token, lambda c: c.delete_sandbox(sandbox_id))


@sandbox_app.command("restart")
def sandbox_restart(sandbox_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Replace a sandbox with a fresh one under the same id."""
    _table(_SB_COLS, [_run(url, token, lambda c: c.restart_sandbox(sandbox_id))])


@sandbox_app.command("exec", context_settings={"allow_interspersed_args": False})
def sandbox_exec(
    sandbox_id: str,
    cmd: list[str] = typer.Argument(..., help="Command and arguments."),
    timeout_s: float = typer.Option(30.0),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Run a command in a sandbox; exits with its exit code (options go before SANDBOX_ID)."""
    res = _run(url, token, lambda c: c.exec(sandbox_id, cmd, timeout_s=timeout_s))
    sys.stdout.write(res["stdout"])
    sys.stderr.write(res["stderr"])
    if res["timed_out"]:
        err.print(f"[red]timed out after {timeout_s}s[/red]")
    raise typer.Exit(res["exit_code"] if res["exit_code"] >= 0 else 124)


# --------------------------------------------------------------- sessions
@session_app.command("list")
def session_list(url: str = URL, token: str = TOKEN) -> None:
    """List your open sessions."""
    _table(["id", "env", "sandbox_id", "steps", "owner"], _run(url, token, lambda c: c.list_sessions()))


@session_app.command("create")
def session_create(
    env: str,
    kwargs: list[str] = typer.Argument(None, help="key=value constructor args"),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Open a session and print its id."""
    info = _run(url, token, lambda c: c.create_session(env, _parse_kwargs(kwargs or [])))
    console.print(info["id"])


@session_app.command("reset")
def session_reset(session_id: str, seed: int = typer.Option(None), url: str = URL, token: str = TOKEN) -> None:
    """Reset a session and print the observation."""
    console.print(_run(url, token, lambda c: c.reset(session_id, seed=seed))["observation"])


@session_app.command("step")
def session_step(session_id: str, action: str, url: str = URL, token: str = TOKEN) -> None:
    """Step with ACTION (wrapped in <answer> tags when it has none)."""
    text = action if "<answer>" in action.lower() else f"<answer>{action}</answer>"
    out = _run(url, token, lambda c: c.step(session_id, text))
    console.print(out["observation"])
    console.print(f"reward={out['reward']:+.2f} terminated={out['terminated']} truncated={out['truncated']}")


@session_app.command("rm")
def session_rm(session_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Close a session."""
    _run(url, token, lambda c: c.close_session(session_id))


# ------------------------------------------------------------------- jobs
_JOB_COLS = ["id", "kind", "state", "progress", "owner", "error"]


@job_app.command("eval")
def job_eval(
    env: str,
    episodes: int = typer.Option(10),
    policy: str = typer.Option("random"),
    seed: int = typer.Option(0),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Start an eval job and print its id."""
    config = {"env": env, "episodes": episodes, "policy": policy, "seed": seed}
    console.print(_run(url, token, lambda c: c.create_job("eval", config))["id"])


@job_app.command("list")
def job_list(url: str = URL, token: str = TOKEN) -> None:
    """List recent jobs."""
    _table(_JOB_COLS, _run(url, token, lambda c: c.list_jobs()))


@job_app.command("show")
def job_show(job_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Show a job as JSON."""
    console.print_json(data=_run(url, token, lambda c: c.get_job(job_id)))


@job_app.command("logs")
def job_logs(job_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Print a job's logs."""
    sys.stdout.write(_run(url, token, lambda c: c.job_logs(job_id)))


@job_app.command("cancel")
def job_cancel(job_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Cancel a job."""
    _table(_JOB_COLS, [_run(url, token, lambda c: c.cancel_job(job_id))])
