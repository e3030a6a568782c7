"""The jobs API's ``train`` kind: ``api.jobs.run_train`` calls :func:`run_job` (``POST /v1/jobs``).

The job config is a :class:`rockroll.trainer.config.TrainConfig` as a mapping (the YAML's content),
optionally with ``overrides: ["key=value", ...]`` or ``config_path: configs/x.yaml`` (the mapping's
other keys then apply on top of that file). It runs :func:`rockroll.trainer.pipeline.run_training`, the
same pipeline as ``rockroll train``, reporting progress and metrics after every step, writing a line
per step, evaluation and twentieth of the warm start to the job's log (as ``rockroll train`` prints
them off a terminal), and stopping at the next step when the job is cancelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from rockroll.envs.config import ConfigError
from rockroll.envs.config_loader import load_config
from rockroll.trainer.config import TrainConfig
from rockroll.trainer.run.progress import TrainProgress

__all__ = ["run_job", "config_for_job", "describe_run", "TrainJobConfig"]


class TrainJobConfig(TrainConfig):
    """The ``config`` of a ``train`` job: a :class:`TrainConfig` mapping, plus where to start from.

    With ``config_path`` the other keys are merged over that file (mappings key by key), then
    ``overrides`` apply; the result is validated as a :class:`TrainConfig` when the job is submitted.
    """

    config_path: str | None = Field(None, description="a YAML config on the server the other keys merge over")
    overrides: list[str] = Field(default_factory=list, description="key=value overrides, applied last")


def config_for_job(config: dict[str, Any]) -> TrainConfig:
    """The validated :class:`TrainConfig` of a job config mapping (ConfigError naming a bad key)."""
    if not isinstance(config, dict):
        raise ConfigError("", f"a train job config must be a mapping of config keys, got {type(config).__name__}")
    data = dict(config)
    overrides = data.pop("overrides", None) or []
    path = data.pop("config_path", None)
    if not isinstance(overrides, list):
        raise ConfigError("overrides", f"overrides must be a list of key=value strings, got {overrides!r}")
    if path is not None and not isinstance(path, str):
        raise ConfigError("config_path", f"config_path must be a path (text), got {path!r}")
    return load_config(TrainConfig, path, overrides, data=data)


def describe_run(cfg: TrainConfig) -> str:
    """What a run trains and on what, as its first log line says: the advantage (``algo.turn_credit`` when
    rows are multi-turn turns, else ``algo.adv_estimator``) and loss, then the RLVR dataset and/or the envs."""
    algo = cfg.algo
    credit = f"{algo.turn_credit} turn credit" if cfg.rollout.plays_envs else algo.adv_estimator
    envs = [f"{e.env_id}" + (f" x{e.ratio:g}" if len(cfg.rollout.env_mix()) > 1 else "") for e in cfg.rollout.env_mix()]
    if cfg.rollout.mode == "rlvr":
        data = cfg.rollout.rlvr.dataset
        name = f"{data.generator} generator" if data.source == "generator" else f"{data.source} {Path(data.path).name}"
        envs = [f"the {name} dataset", *(envs if cfg.rollout.envs else [])]
    return f"{credit}/{algo.pg_variant} on {' + '.join(envs)} ({cfg.rollout.mode}), {cfg.total_steps} steps"


def run_job(config: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Run a training job with the API's :class:`rockroll.api.jobs.worker.WorkerContext`; return the final metrics."""
    from rockroll.trainer.pipeline import run_training

    cfg = config_for_job(config)
    ctx.log(f"train {cfg.name}: {describe_run(cfg)}")

    progress = TrainProgress(None, cfg.total_steps, write=ctx.log)  # a line per step and evaluation in the log

    def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
        progress.on_step(step, total, metrics)
        keep = {
            k: v
            for k, v in metrics.items()
            if k.startswith(("env/", "eval/", "actor/pg_loss", "actor/kl", "critic/value_loss"))
        }
        ctx.report(progress=(step + 1) / max(total, 1), metrics={"step": step, **keep})
        ctx.check()  # raises Cancelled: the run stops after this step

    make_source = getattr(ctx, "env_source", None)  # a job worker's: sessions of the control plane's sandboxes
    source = make_source() if callable(make_source) else None
    summary = run_training(cfg, on_step, on_event=progress.on_event, env_source=source)
    out = {k: v for k, v in summary.items() if isinstance(v, (int, float))}
    out["run_dir"] = summary["run_dir"]
    ctx.log(f"success before RL {summary.get('success_start', float('nan')):.3f}, after {summary['success_end']:.3f}")
    return out
