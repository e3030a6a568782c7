"""``rockroll train CONFIG.yaml [key=value ...]``, ``rockroll plot RUN`` and ``rockroll export RUN`` (typer commands)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import typer

from rockroll.trainer.config_io import config_help, load_config

__all__ = ["train", "plot", "export", "register"]


def _split_args(config: str | None, overrides: list[str]) -> tuple[str | None, list[str]]:
    """``(YAML path or None, key=value overrides)`` from the positional arguments, in any order."""
    args = [a for a in (config, *overrides) if a is not None]
    paths = [a for a in args if "=" not in a or Path(a).is_file()]
    if len(paths) > 1:
        _fail(
            f"expected one YAML config and key=value overrides, got {len(paths)} configs: {', '.join(paths)}",
            "overrides are key=value, e.g. total_steps=20",
        )
    if paths and not Path(paths[0]).is_file():
        hint = "overrides are key=value, e.g. total_steps=20" if "." not in Path(paths[0]).name else ""
        _fail(f"config error: no config file {paths[0]}", hint or "see configs/ for examples")
    return (paths[0] if paths else None), [a for a in args if a not in paths]


def _fail(message: str, hint: str = "", code: int = 2, cause: BaseException | None = None) -> NoReturn:
    """One line of what is wrong (and one of what to do) on stderr; exit ``code``."""
    typer.echo(message, err=True)
    if hint:
        typer.echo(hint, err=True)
    raise typer.Exit(code) from cause


def _claim_run_dir(run_dir: Path, name: str, *, resume: bool, overwrite: bool) -> int:
    """Check the run directory against --resume / --overwrite (clearing it for --overwrite); return the first step."""
    from rockroll.trainer import checkpoint as ckpt

    if resume and overwrite:
        _fail("--resume and --overwrite exclude each other", "--resume continues the run, --overwrite starts it over")
    if resume:
        last = ckpt.latest_step(run_dir)
        if last is None:
            where = f"{run_dir} has no checkpoint" if run_dir.is_dir() else f"there is no run directory {run_dir}"
            _fail(f"cannot resume run {name!r}: {where}", "start it without --resume (or with --overwrite)")
        return last + 1
    if run_dir.is_dir() and any(run_dir.iterdir()):
        if not overwrite:
            _fail(
                f"run {name!r} exists ({run_dir})",
                "continue it with --resume, start it over with --overwrite, or pick another name=...",
            )
        if not ckpt.is_run_dir(run_dir):
            _fail(f"refusing to delete {run_dir}: it does not look like one rockroll run", "remove it yourself")
        shutil.rmtree(run_dir)
    return 0


def train(
    config: str = typer.Argument(None, help="YAML config (see configs/); omitted: the defaults"),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. optim.lr=1e-4 total_steps=20"),
    resume: bool = typer.Option(False, "--resume", help="continue the run from its last checkpoint"),
    overwrite: bool = typer.Option(False, "--overwrite", help="delete the run's earlier output and start it over"),
    help_config: bool = typer.Option(
        False, "--help-config", help="list every config key with its type, default and description"
    ),
) -> None:
    """Train a policy with RL (GRPO/PPO family) on a rockroll env; output goes to runs/<name>/.

    A run name that exists needs --resume (go on from its last checkpoint) or --overwrite (start over).

    Examples (a YAML config, the defaults plus overrides, a resumed run):

        rockroll train configs/frozenlake_tiny.yaml total_steps=20 name=try1

        rockroll train total_steps=5 rollout.scheduler.group_size=4

        rockroll train configs/frozenlake_tiny.yaml name=try1 --resume
    """
    if help_config:
        typer.echo(config_help(), nl=False)
        return
    config, overrides = _split_args(config, list(overrides or []))
    try:
        cfg = load_config(config, overrides)
    except (ValueError, FileNotFoundError) as e:
        _fail(f"config error: {e}", "`rockroll train --help-config` lists every key", cause=e)
    run_dir = Path(cfg.logging.run_dir) / cfg.name
    start = _claim_run_dir(run_dir, cfg.name, resume=resume, overwrite=overwrite)
    from rich.console import Console

    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.progress import TrainProgress

    console = Console()
    envs = " + ".join(f"{e.env_id}" + (f" x{e.ratio:g}" if cfg.rollout.mixed else "") for e in cfg.rollout.env_mix())
    what = f"{cfg.algo.adv_estimator}/{cfg.algo.pg_variant} on {envs}, {cfg.total_steps} steps"
    console.print(
        f"rockroll train {cfg.name}: {what}" + (f" (resuming at step {start})" if resume else ""),
        markup=False,
        highlight=False,
    )
    if resume and start >= cfg.total_steps:
        console.print(f"run {cfg.name} already trained {start} steps; raise total_steps to train on", markup=False)
    sys.stdout.flush()
    with TrainProgress(console, cfg.total_steps, start_step=start, enabled=cfg.logging.progress) as prog:
        summary = run_training(cfg, prog.on_step, resume=resume, on_event=prog.on_event)
    if cfg.rollout.eval_episodes == 0:
        console.print(f"no held-out evaluation (rollout.eval_episodes=0); run dir {summary['run_dir']}", markup=False)
        typer.echo(json.dumps({"steps": summary.get("steps")}))
        return
    before = summary.get("success_before_sft")
    if before is not None:
        console.print(f"success before SFT warm start: {before:.1%}")
    if "success_start" in summary:
        console.print(f"success before RL:  {summary['success_start']:.1%}")
    if summary.get("report"):
        console.print(f"held-out success by difficulty (greedy, {cfg.rollout.eval_episodes} maps):")
        typer.echo(summary["report"])
    console.print(
        f"success after RL:   {summary['success_end']:.1%}   (held-out, greedy; run dir {summary['run_dir']})",
        markup=False,
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
    """Write PNG curves of a run's metrics (one figure per namespace).

    Example:

        rockroll plot runs/frozenlake_tiny --out /tmp/plots
    """
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
    """Export a run's policy as a Hugging Face directory (safetensors, tokenizer, chat template).

    Example:

        rockroll export runs/frozenlake_tiny --step 50 --out /tmp/policy-step50
    """
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
