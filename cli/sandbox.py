"""``rockroll sandbox ...``: sandboxes on a rockroll server (list, create, exec, restart, remove), and
``prune``: the process sandboxes a state directory of this machine still holds, without a server."""

from __future__ import annotations

import sys

import typer

from rockroll.cli.envs import fail
from rockroll.cli.remote import TOKEN, URL, _run, _table, console, err
from rockroll.sandbox.prune import prune

__all__ = ["sandbox_app"]

sandbox_app = typer.Typer(
    help="Sandboxes on a rockroll server (prune: this machine's leftover process sandboxes).", no_args_is_help=True
)

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
    """Run a command in a sandbox; exits with its exit code (options go before SANDBOX_ID; `--` may
    separate the command).

    Example: rockroll sandbox exec --timeout-s 60 sb-1a2b3c4d -- python -c "print(1)"
    """
    if cmd and cmd[0] == "--":  # `exec SB -- uname -a`: the separator is not part of the command
        cmd = cmd[1:]
    if not cmd:
        raise typer.BadParameter("no command given after the sandbox id", param_hint="CMD")
    res = _run(url, token, lambda c: c.exec(sandbox_id, cmd, timeout_s=timeout_s))
    sys.stdout.write(res["stdout"])
    sys.stderr.write(res["stderr"])
    if res["timed_out"]:
        err.print(f"[red]timed out after {timeout_s}s[/red]")
    raise typer.Exit(res["exit_code"] if res["exit_code"] >= 0 else 124)


@sandbox_app.command("prune")
def sandbox_prune(
    state_dir: str = typer.Option(..., "--state-dir", help="The servers' sandbox state directory (sandbox_state_dir)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list what would be stopped and removed."),
) -> None:
    """Stop the process sandboxes a state directory still runs and remove their folders, without a server
    (every sandbox there: run it when no server uses the directory). One line each, then a total.

    Example: rockroll sandbox prune --state-dir /tmp/rockroll-sb-1000 --dry-run
    """
    try:
        done, failed = prune(state_dir, dry_run=dry_run)
    except (ValueError, OSError) as e:
        fail(str(e), 2, e)
    verbs = ("would stop", "would remove") if dry_run else ("stopped", "removed")
    for lo in done:
        action = verbs[0] if lo.pid is not None else verbs[1]
        typer.echo(f"{action:<12} {lo.describe()}")
    for lo in failed:
        typer.echo(f"{'not stopped':<12} {lo.describe()}: still running (another user's? run as its owner)", err=True)
    sandboxes = sum(1 for lo in done if lo.pid is not None)
    folders = len(done) - sandboxes
    typer.echo(
        f"total: {sandboxes} sandbox{'es' * (sandboxes != 1)}, {folders} leftover folder{'s' * (folders != 1)}"
        + (" (dry run: nothing changed)" if dry_run else " stopped and removed")
        + (f"; {len(failed)} not stopped" if failed else "")
    )
    if failed:
        raise typer.Exit(1)
