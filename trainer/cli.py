"""``rockroll train CONFIG.yaml [key=value ...]`` and ``rockroll plot RUN`` (typer commands)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

__all__ = ["train", "plot", "register"]


def _print_config_help() -> None:
    from rich.console import Console
    from rich.table import Table

    from rockroll.trainer.config_io import describe_config

    table = Table("key", "default", "help", title="rockroll train: config keys (YAML sections or key=value overrides)")
    for key, default, help_text in describe_config():
        table.add_row(key, default, help_text)
    Console().print(table)


def train(
    config: Path = typer.Argument(None, help="YAML config (see configs/); omitted: defaults"),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. optim.lr=1e-4 total_steps=20"),
    resume: bool = typer.Option(False, "--resume", help="continue the run from its latest checkpoint"),
    help_config: bool = typer.Option(False, "--help-config", help="list every config key with its default and help"),
) -> None:
    """Train a policy with RL (GRPO/PPO family) on a rockroll env; metrics go to runs/<name>/."""
    if help_config:
        _print_config_help()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rockroll.trainer.config_io import load_config
    from rockroll.trainer.pipeline import run_training

    try:
        cfg = load_config(config, list(overrides or []))
    except (ValueError, FileNotFoundError) as e:
        typer.echo(f"config error: {e}", err=True)
        raise typer.Exit(2) from e
    console = Console()
    console.print(
        f"[bold]rockroll train[/] {cfg.name}: {cfg.algo.adv_estimator}/{cfg.algo.pg_variant} on {cfg.rollout.env_id}, {cfg.total_steps} steps"
    )
    with Progress(
        TextColumn("[bold blue]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
        disable=not cfg.logging.progress,
    ) as prog:
        task = prog.add_task("train", total=cfg.total_steps, info="")

        def on_step(step: int, total: int, m: dict[str, float]) -> None:
            succ = m.get(f"env/{cfg.rollout.env_id.split('-')[0]}/success", 0.0)
            ev = [v for k, v in m.items() if k.startswith("eval/") and k.endswith("/success")]
            info = f"train success {succ:.2f}" + (f"  eval {ev[0]:.2f}" if ev else "")
            prog.update(task, completed=step + 1, info=info)

        summary = run_training(cfg, on_step, resume=resume)
    before = summary.get("success_before_sft")
    if before is not None:
        console.print(f"success before SFT warm start: {before:.1%}")
    if "success_start" in summary:
        console.print(f"success before RL:  {summary['success_start']:.1%}")
    console.print(
        f"success after RL:   {summary['success_end']:.1%}   (held-out, greedy; run dir {summary['run_dir']})"
    )
    typer.echo(
        json.dumps(
            {k: summary[k] for k in ("success_before_sft", "success_start", "success_end", "steps") if k in summary}
        )
    )


def plot(
    run: Path = typer.Argument(..., help="run directory (runs/<name>) or its metrics.jsonl"),
    out: Path = typer.Option(None, "--out", help="output folder (default <run>/plots)"),
) -> None:
    """Write PNG curves of a run's metrics (one figure per namespace)."""
    from rockroll.trainer.plot import plot_run

    for p in plot_run(run, out):
        typer.echo(str(p))


def register(app: typer.Typer) -> None:
    """Mount ``train`` and ``plot`` on the ``rockroll`` app."""
    app.command("train")(train)
    app.command("plot")(plot)
