"""``rockroll env|sandbox|session|job ...``: the control plane from the shell, over :class:`rockroll.api.client.Client`.

The server URL and token come from ``--url``/``--token`` or ``$ROCKROLL_URL``/``$ROCKROLL_TOKEN``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rockroll.agentrl.config_loader import read_yaml
from rockroll.api.cli_envs import _parse_kwargs, fail

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
    """Call ``fn(client)``; an error answer or a server that is down ends the command in one or two lines
    (:mod:`rockroll.api.cli_errors`, which ``rockroll`` applies to every command)."""
    from rockroll.api.client import Client

    with Client(url, token or None, retries=1) as c:
        return fn(c)


def _say(text: Any) -> None:
    """Print server or env text verbatim (``[Search]`` is not Rich markup)."""
    console.print(str(text), markup=False, highlight=False, soft_wrap=True)


def _table(columns: list[str], rows: list[dict[str, Any]]) -> None:
    table = Table(*columns)
    for row in rows:
        table.add_row(*[Text(_cell(row.get(c))) for c in columns])
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
    """List envs (built-in and custom).

    Example: rockroll env list --tag grid --url http://127.0.0.1:8080
    """
    cols = ["id", "kind", "owner", "visibility", "max_steps", "tags", "description"]
    _table(cols, _run(url, token, lambda c: c.list_envs(tag)))


@env_app.command("show")
def env_show(name: str, url: str = URL, token: str = TOKEN) -> None:
    """Show one env's spec as JSON.

    Example: rockroll env show FrozenLake-v0
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

    Example: rockroll env register Maze-v0 --entry-point maze:MazeEnv --source maze.py --max-steps 30
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

    Example: rockroll env rm alice/Maze-v0
    """
    _run(url, token, lambda c: c.delete_env(name))


# -------------------------------------------------------------- sandboxes
_SB_COLS = ["id", "state", "pool", "owner", "uptime_s", "restarts", "sessions", "cpu_seconds", "memory_bytes"]


@sandbox_app.command("list")
def sandbox_list(url: str = URL, token: str = TOKEN) -> None:
    """List your sandboxes (admins: all).

    Example: rockroll sandbox list
    """
    _table(_SB_COLS, _run(url, token, lambda c: c.list_sandboxes()))


@sandbox_app.command("create")
def sandbox_create(
    cpus: float = typer.Option(1.0),
    memory_mb: int = typer.Option(512),
    network: bool = typer.Option(False),
    ttl_s: float = typer.Option(None, help="Lifetime in seconds (default and cap: the server's)."),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Start a sandbox and print its id.

    Example: rockroll sandbox create --cpus 2 --memory-mb 1024 --ttl-s 600
    """
    fields = {"cpus": cpus, "memory_mb": memory_mb, "network": network}
    if ttl_s is not None:
        fields["ttl_s"] = ttl_s
    sb = _run(url, token, lambda c: c.create_sandbox(**fields))
    console.print(sb["id"])


@sandbox_app.command("rm")
def sandbox_rm(sandbox_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Delete a sandbox.

    Example: rockroll sandbox rm sb-1a2b3c4d
    """
    _run(url, token, lambda c: c.delete_sandbox(sandbox_id))


@sandbox_app.command("restart")
def sandbox_restart(sandbox_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Replace a sandbox with a fresh one under the same id.

    Example: rockroll sandbox restart sb-1a2b3c4d
    """
    _table(_SB_COLS, [_run(url, token, lambda c: c.restart_sandbox(sandbox_id))])


@sandbox_app.command("exec", context_settings={"allow_interspersed_args": False})
def sandbox_exec(
    sandbox_id: str,
    cmd: list[str] = typer.Argument(..., help="Command and arguments."),
    timeout_s: float = typer.Option(30.0),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Run a command in a sandbox; exits with its exit code (options go before SANDBOX_ID).

    Example: rockroll sandbox exec --timeout-s 60 sb-1a2b3c4d python -c "print(1)"
    """
    res = _run(url, token, lambda c: c.exec(sandbox_id, cmd, timeout_s=timeout_s))
    sys.stdout.write(res["stdout"])
    sys.stderr.write(res["stderr"])
    if res["timed_out"]:
        err.print(f"[red]timed out after {timeout_s}s[/red]")
    raise typer.Exit(res["exit_code"] if res["exit_code"] >= 0 else 124)


# --------------------------------------------------------------- sessions
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


# ------------------------------------------------------------------- jobs
_JOB_COLS = ["id", "kind", "state", "progress", "owner", "error"]


POLL_S = 1.0  # how often --follow asks for new log lines


def _job_metrics_table(metrics: dict[str, Any]) -> None:
    table = Table("metric", "value")
    for key in sorted(metrics):
        table.add_row(Text(key), Text(_cell(metrics[key])))
    console.print(table)


def _follow(c: Any, job_id: str) -> None:
    """Print a job's logs as they grow, then its metrics; exit 0 when it succeeded, else 1 (130: detached)."""
    try:
        for chunk in c.follow_logs(job_id, poll_s=POLL_S):
            sys.stdout.write(chunk)
            sys.stdout.flush()
    except KeyboardInterrupt as e:
        hint = f"`rockroll job cancel {job_id}` stops it, `rockroll job logs {job_id} --follow` follows again"
        fail(f"stopped following; job {job_id} keeps running ({hint})", 130, e)
    job = c.get_job(job_id)
    if job["metrics"]:
        _job_metrics_table(job["metrics"])
    if job["state"] != "succeeded":
        fail(f"job {job_id} {job['state']}" + (f": {job['error']}" if job["error"] else ""), 1)


@job_app.command("train")
def job_train(
    config: str = typer.Argument(None, help="YAML config on this machine (its content is sent); omitted: defaults"),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. optim.lr=1e-4 total_steps=20"),
    server_config: str = typer.Option(None, "--server-config", help="Start from a YAML config on the server (path)."),
    follow: bool = typer.Option(
        False, "--follow", "-f", help="Print the logs until the job ends, then its metrics; exit 0 if it succeeded."
    ),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Submit a train job (the pipeline of `rockroll train`, run by the server) and print its id.

    The server validates the config first: a bad key fails here, naming it. Relative paths in the
    config (model.path, logging.run_dir) are read on the server. Ctrl-C while following leaves the
    job running; `rockroll job cancel JOB_ID` stops it.

    Example: rockroll job train configs/frozenlake_tiny.yaml total_steps=50 --follow
    """
    overrides = list(overrides or [])
    if config is not None and "=" in config and not Path(config).is_file():  # `rockroll job train k=v ...`
        config, overrides = None, [config, *overrides]
    for item in overrides:
        if "=" not in item:
            raise typer.BadParameter(f"expected key=value, got {item!r}", param_hint="OVERRIDES")
    data = read_yaml(config) if config else {}
    job = _run(url, token, lambda c: c.train(data, overrides=overrides, config_path=server_config))
    typer.echo(job["id"])
    if follow:
        _run(url, token, lambda c: _follow(c, job["id"]))


@job_app.command("eval")
def job_eval(
    env: str,
    episodes: int = typer.Option(10),
    policy: str = typer.Option("random"),
    seed: int = typer.Option(0),
    follow: bool = typer.Option(False, "--follow", "-f", help="Print the logs until the job ends, then its metrics."),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Start an eval job and print its id.

    Example: rockroll job eval FrozenLake-v0 --episodes 20 --policy expert --follow
    """
    config = {"env": env, "episodes": episodes, "policy": policy, "seed": seed}
    job = _run(url, token, lambda c: c.create_job("eval", config))
    typer.echo(job["id"])
    if follow:
        _run(url, token, lambda c: _follow(c, job["id"]))


@job_app.command("list")
def job_list(url: str = URL, token: str = TOKEN) -> None:
    """List recent jobs.

    Example: rockroll job list
    """
    _table(_JOB_COLS, _run(url, token, lambda c: c.list_jobs()))


@job_app.command("show")
def job_show(job_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Show a job as JSON.

    Example: rockroll job show job-1a2b3c4d
    """
    console.print_json(data=_run(url, token, lambda c: c.get_job(job_id)))


@job_app.command("logs")
def job_logs(
    job_id: str,
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines until the job ends."),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Print a job's logs.

    Example: rockroll job logs job-1a2b3c4d --follow
    """
    if follow:
        _run(url, token, lambda c: _follow(c, job_id))
    else:
        sys.stdout.write(_run(url, token, lambda c: c.job_logs(job_id)))


@job_app.command("metrics")
def job_metrics(
    job_id: str,
    as_json: bool = typer.Option(False, "--json", help="Print them as JSON."),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Show a job's latest metrics (train: step, env/..., eval/..., actor/...).

    Example: rockroll job metrics job-1a2b3c4d --json
    """
    metrics = _run(url, token, lambda c: c.job_metrics(job_id))
    if as_json:
        typer.echo(json.dumps(metrics, indent=2, sort_keys=True))
    else:
        _job_metrics_table(metrics)


@job_app.command("cancel")
def job_cancel(job_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Cancel a job (a running train job stops after its current step).

    Example: rockroll job cancel job-1a2b3c4d
    """
    _table(_JOB_COLS, [_run(url, token, lambda c: c.cancel_job(job_id))])
