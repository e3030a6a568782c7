"""``rockroll train CONFIG.yaml [key=value ...]``, ``rockroll plot RUN`` and ``rockroll export RUN`` (typer commands)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import typer

from rockroll.envs.config import ConfigError
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
    from rockroll.trainer.run import checkpoint as ckpt

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


def _server_url(cfg: Any, url: str | None) -> str | None:
    """The control plane whose sessions play the run's envs: ``--url``; else ``$ROCKROLL_URL`` when an env of
    the run is not registered here (an env registered on that server); else None (envs in this process)."""
    from rockroll.trainer.rollout.env_check import registered_here

    if url:
        return url
    if any(not registered_here(e.env_id) for e in cfg.rollout.env_mix()):
        return os.environ.get("ROCKROLL_URL") or None
    return None


@contextlib.contextmanager
def _env_source(cfg: Any, url: str | None, token: str | None) -> Iterator[Any]:
    """The run's env source (None: the one ``rollout.sandbox`` names), checked against the run's envs before
    anything is built: an unknown id, or a setting that needs a local copy of a server's env, ends here."""
    from rockroll.trainer.rollout.env_check import check_train_envs

    source = None
    with contextlib.ExitStack() as stack:
        if url:
            from rockroll.agentrl.sources.remote import RemoteSource
            from rockroll.client.sdk import Client

            source = RemoteSource(stack.enter_context(Client(url, token or None)))
        try:
            check_train_envs(cfg, source)
        except ConfigError as e:
            _fail(f"config error: {e}", cause=e)
        except LookupError as e:  # UnknownEnvError: no one knows the id (the server's suggestions included)
            hint = (
                "`rockroll remote-env list` shows the ids this token may use"
                if url
                else "an env registered on a server plays through it: add --url URL (or set ROCKROLL_URL) and "
                "--token, and give its full id OWNER/NAME-vN"
            )
            _fail(f"config error: {e}", hint, cause=e)
        yield source


def _unstarted_run_removed(run_dir: Path) -> None:
    """Remove the folder of a run that failed before its first RL step (no checkpoint): the retry may reuse the name."""
    from rockroll.trainer.run import checkpoint as ckpt

    if run_dir.is_dir() and ckpt.latest_step(run_dir) is None:
        shutil.rmtree(run_dir, ignore_errors=True)


def train(
    config: str = typer.Argument(None, help="YAML config (see configs/); omitted: the defaults"),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. optim.lr=1e-4 total_steps=20"),
    resume: bool = typer.Option(False, "--resume", help="continue the run from its last checkpoint"),
    overwrite: bool = typer.Option(False, "--overwrite", help="delete the run's earlier output and start it over"),
    url: str = typer.Option(
        None,
        "--url",
        help="play the envs through this control plane's sessions (default: $ROCKROLL_URL when an "
        "env is not registered here, e.g. alice/Nim-v0)",
        show_default=False,
    ),
    token: str = typer.Option(None, "--token", envvar="ROCKROLL_TOKEN", help="API token for --url", show_default=False),
    help_config: bool = typer.Option(
        False, "--help-config", help="list every config key with its type, default and description"
    ),
) -> None:
    """Train a policy with RL (GRPO/PPO family) on a rockroll env; output goes to runs/<name>/.

    A run name that exists needs --resume (go on from its last checkpoint) or --overwrite (start over);
    a run that fails before its first step leaves no folder behind. An env registered on a server
    (OWNER/NAME-vN) plays through that server's sessions: --url (or $ROCKROLL_URL) and --token.

    Examples (a YAML config, the defaults plus overrides, a resumed run, an env of a server):

        rockroll train configs/frozenlake_tiny.yaml total_steps=20 name=try1

        rockroll train total_steps=5 rollout.scheduler.group_size=4

        rockroll train configs/frozenlake_tiny.yaml name=try1 --resume

        rockroll train rollout.env_id=alice/Nim-v0 total_steps=5 --url http://127.0.0.1:8080 --token $TOKEN
    """
    if help_config:
        typer.echo(config_help(), nl=False)
        return
    config, overrides = _split_args(config, list(overrides or []))
    try:
        cfg = load_config(config, overrides)
    except (ValueError, FileNotFoundError) as e:
        _fail(f"config error: {e}", "`rockroll train --help-config` lists every key", cause=e)
    url = _server_url(cfg, url)
    with _env_source(cfg, url, token) as source:
        run_dir = Path(cfg.logging.run_dir) / cfg.name
        start = _claim_run_dir(run_dir, cfg.name, resume=resume, overwrite=overwrite)
        summary = _run(cfg, source, url, start, resume=resume)
    _print_summary(cfg, summary)


def _run(cfg: Any, source: Any, url: str | None, start: int, *, resume: bool) -> dict[str, Any]:
    """Print what runs, then run it with a progress bar; a run that fails before its first step is removed."""
    from rich.console import Console

    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.progress import TrainProgress

    console = Console()
    envs = " + ".join(f"{e.env_id}" + (f" x{e.ratio:g}" if cfg.rollout.mixed else "") for e in cfg.rollout.env_mix())
    envs = f"the {cfg.rollout.rlvr.dataset.source} dataset (rlvr)" if cfg.rollout.mode == "rlvr" else envs
    what = f"{cfg.algo.adv_estimator}/{cfg.algo.pg_variant} on {envs}, {cfg.total_steps} steps"
    console.print(
        f"rockroll train {cfg.name}: {what}"
        + (f" (envs through {url})" if url else "")
        + (f" (resuming at step {start})" if resume else ""),
        markup=False,
        highlight=False,
    )
    if resume and start >= cfg.total_steps:
        console.print(f"run {cfg.name} already trained {start} steps; raise total_steps to train on", markup=False)
    sys.stdout.flush()
    stepped = False

    def on_step(*args: Any) -> None:
        nonlocal stepped
        stepped = True
        prog.on_step(*args)

    try:
        with TrainProgress(console, cfg.total_steps, start_step=start, enabled=cfg.logging.progress) as prog:
            return run_training(cfg, on_step, resume=resume, on_event=prog.on_event, env_source=source)
    except BaseException:
        if not resume and not stepped:
            _unstarted_run_removed(Path(cfg.logging.run_dir) / cfg.name)
        raise


def _print_summary(cfg: Any, summary: dict[str, Any]) -> None:
    """Held-out success before and after, the report by difficulty, and the summary as one JSON line."""
    from rich.console import Console

    console = Console()
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
    from rockroll.cli.spinner import working
    from rockroll.trainer.run.plot import plot_run

    with working(f"plotting {run} (loading matplotlib)") as update:
        paths = plot_run(run, out, on_file=lambda p: update(f"plotting {run}: wrote {p.name}"))
    for p in paths:
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
    from rockroll.cli.spinner import working
    from rockroll.trainer.run.export import export_run

    try:
        with working(f"exporting {run} ({step})"):
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
