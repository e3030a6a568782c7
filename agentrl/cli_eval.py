"""``rockroll eval CONFIG``: evaluate a model on envs from a YAML config (see :mod:`rockroll.agentrl.eval_config`).

Mounted in :mod:`rockroll.api.cli` with ``app.add_typer(eval_app, name="eval")``. Heavy imports happen
inside the command, so ``rockroll --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["eval_app"]

eval_app = typer.Typer(
    help="Evaluate a model (any engine) on env ids or tags; writes a JSON + Markdown report.",
    context_settings={"allow_interspersed_args": True},  # options may follow CONFIG
)


@eval_app.callback(invoke_without_command=True)
def eval_cmd(
    config: Path = typer.Argument(..., exists=True, dir_okay=False, help="YAML eval config (see agentrl.eval_config)."),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides, e.g. concurrency=4 seed=7."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Report folder (overrides output_dir of the config)."),
    episodes: int | None = typer.Option(None, min=1, help="Episodes per env (overrides every entry)."),
    progress: bool = typer.Option(True, help="Show a progress bar on stderr."),
) -> None:
    """Run the evaluation CONFIG describes and print the report (Markdown)."""
    from rockroll.agentrl.eval import run_eval
    from rockroll.agentrl.eval_config import load_eval_config

    try:
        cfg = load_eval_config(config, overrides or [])
    except (ValueError, TypeError) as e:
        typer.echo(f"error: invalid eval config {config}: {e}", err=True)
        raise typer.Exit(2) from e
    if out is not None:
        cfg.output_dir = str(out)
    if episodes is not None:
        for entry in cfg.envs:
            entry.episodes = episodes
    report = run_eval(cfg, progress=progress)
    typer.echo(report.to_markdown())
    if cfg.output_dir:
        typer.echo(f"report written to {cfg.output_dir}/report.json and report.md")
