"""``rockroll train CONFIG.yaml [key=value ...]``, ``rockroll plot RUN`` and ``rockroll export RUN`` (typer commands)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rockroll.trainer.config_io import config_help, load_config

__all__ = ["train", "plot", "export", "register"]


def train(
    config: str = typer.Argument(None, help="YAML config (see configs/); omitted: the defaults"),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. optim.lr=1e-4 total_steps=20"),
    resume: bool = typer.Option(False, "--resume", help="continue the run from its latest checkpoint"),
    help_config: bool = typer.Option(
        False, "--help-config", help="list every config key with its type, default and description"
    ),
) -> None:
    """Train a policy with RL (GRPO/PPO family) on a rockroll env; metrics go to runs/<name>/."""
    if help_config:
        typer.echo(config_help(), nl=False)
        return
    overrides = list(overrides or [])
    if config is not None and "=" in config and not Path(config).is_file():  # `rockroll train k=v ...`: defaults
        config, overrides = None, [str(config), *overrides]
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rockroll.trainer.pipeline import run_training

    try:
        cfg = load_config(config, overrides)
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
    if summary.get("report"):
        console.print(f"held-out success by difficulty (greedy, {cfg.rollout.eval_episodes} maps):")
        typer.echo(summary["report"])
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


def export(
    run: Path = typer.Argument(..., help="run directory (runs/<name>)"),
    step: str = typer.Option("final", "--step", help="checkpoint step N, final (the newest) or warmstart"),
    out: Path = typer.Option(None, "--out", help="export directory (default <run>/export/{step-N|final|warmstart})"),
    base_model: Path = typer.Option(
        None, "--base-model", help="the run's base model (default: model.path of its config)"
    ),
) -> None:
    """Export a run's policy as a Hugging Face directory (safetensors, tokenizer, chat template)."""
    from rockroll.trainer.export import export_run

    try:
        path = export_run(run, step, out, base_model=base_model)
    except (ValueError, OSError) as e:  # ExportError, a config.yaml that does not read
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Mount ``train``, ``plot`` and ``export`` on the ``rockroll`` app."""
    app.command("train")(train)
    app.command("plot")(plot)
    app.command("export")(export)
