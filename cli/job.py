"""``rockroll job ...``: train/eval jobs on a rockroll server (submit, follow, logs, metrics, cancel)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from rockroll.cli.envs import fail
from rockroll.cli.remote import TOKEN, URL, _cell, _run, _table, console
from rockroll.envs.config_loader import read_yaml

__all__ = ["job_app"]

job_app = typer.Typer(help="Train/eval jobs on a rockroll server.", no_args_is_help=True)

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


@job_app.command("submit-train")
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

    Example: rockroll job submit-train configs/frozenlake_tiny.yaml total_steps=50 --follow
    """
    overrides = list(overrides or [])
    if config is not None and "=" in config and not Path(config).is_file():  # `rockroll job submit-train k=v ...`
        config, overrides = None, [config, *overrides]
    for item in overrides:
        if "=" not in item:
            raise typer.BadParameter(f"expected key=value, got {item!r}", param_hint="OVERRIDES")
    data = read_yaml(config) if config else {}
    job = _run(url, token, lambda c: c.train(data, overrides=overrides, config_path=server_config))
    typer.echo(job["id"])
    if follow:
        _run(url, token, lambda c: _follow(c, job["id"]))


def _model_eval(env: str, model: str, episodes: int, seed: int, max_turns: int | None, device: str) -> dict[str, Any]:
    """The eval job config of ``--model``: the hf engine on a model folder of the server, greedy, one env."""
    episode: dict[str, Any] = {"temperature": 0.0}  # the prompt settings come from the model's folder
    if max_turns is not None:
        episode["max_turns"] = max_turns
    return {
        "name": f"{Path(model).name} on {env}",
        "engine": {"kind": "hf", "args": {"model_path": model, "device": device}},
        "envs": [{"env": env, "episodes": episodes}],
        "episode": episode,
        "seed": seed,
    }


@job_app.command("submit-eval")
def job_eval(
    env: str = typer.Argument(..., help="Env id: a built-in one or OWNER/NAME-vN (yours, or public)."),
    episodes: int = typer.Option(10, help="Episodes, on seeds seed, seed+1, ..."),
    policy: str = typer.Option(None, help="A built-in policy plays: random (default) or expert.", show_default=False),
    model: str = typer.Option(
        None,
        "--model",
        help="A model plays instead: a model folder on the server, relative to your job directory "
        "(e.g. runs/NAME/export/final of a train job) or in a folder the admin shares.",
        show_default=False,
    ),
    max_turns: int = typer.Option(None, "--max-turns", help="With --model: turns per episode.", show_default=False),
    device: str = typer.Option("cpu", "--device", help="With --model: torch device on the server."),
    seed: int = typer.Option(0, help="Seed of the first episode."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Print the logs until the job ends, then its metrics."),
    url: str = URL,
    token: str = TOKEN,
) -> None:
    """Start an eval job (a built-in policy, or --model) on the server and print its id.

    The job's worker plays the env in your sandboxes on the server; --model names a folder there.

    Example: rockroll job submit-eval FrozenLake-v0 --episodes 20 --policy expert --follow

    With a model:

        rockroll job submit-eval alice/Nim-v0 --model runs/nim/export/final --episodes 20 --follow
    """
    if model is not None and policy is not None:
        raise typer.BadParameter("give --policy or --model, not both", param_hint="--model")
    if model is None:
        config = {"env": env, "episodes": episodes, "policy": policy or "random", "seed": seed}
    else:
        config = _model_eval(env, model, episodes, seed, max_turns, device)
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
    elif not metrics:
        state = _run(url, token, lambda c: c.get_job(job_id))["state"]
        typer.echo(
            f"no metrics yet: job {job_id} is {state} (train jobs report after each step, eval jobs after each "
            f"episode; `rockroll job logs {job_id} --follow` shows its progress)"
        )
    else:
        _job_metrics_table(metrics)


@job_app.command("cancel")
def job_cancel(job_id: str, url: str = URL, token: str = TOKEN) -> None:
    """Cancel a job (a running train job stops after its current step).

    Example: rockroll job cancel job-1a2b3c4d
    """
    _table(_JOB_COLS, [_run(url, token, lambda c: c.cancel_job(job_id))])


# Old spellings, kept working but hidden: `rockroll job train` read like the local `rockroll train`.
job_app.command("train", hidden=True)(job_train)
job_app.command("eval", hidden=True)(job_eval)
