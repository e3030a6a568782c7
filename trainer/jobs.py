"""The jobs API's ``train`` kind: ``api.jobs.run_train`` calls :func:`run_job` (``POST /v1/jobs``).

The job config is a :class:`rockroll.trainer.config.TrainConfig` as a mapping (the YAML's content),
optionally with ``overrides: ["key=value", ...]`` or ``config_path: configs/x.yaml`` (the mapping's
other keys then apply on top of that file). It runs :func:`rockroll.trainer.pipeline.run_training`, the
same pipeline as ``rockroll train``, reporting progress and metrics after every step and stopping
at the next step when the job is cancelled.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_job", "config_for_job"]


def config_for_job(config: dict[str, Any]) -> Any:
    """The validated :class:`TrainConfig` of a job config mapping."""
    import yaml

    from rockroll.trainer.config_io import apply_overrides, config_from_dict

    data = dict(config)
    overrides = list(data.pop("overrides", []) or [])
    path = data.pop("config_path", None)
    if path:
        from pathlib import Path

        base = yaml.safe_load(Path(path).read_text()) or {}
        for key, value in data.items():
            base[key] = (
                {**base.get(key, {}), **value} if isinstance(value, dict) and isinstance(base.get(key), dict) else value
            )
        data = base
    return config_from_dict(apply_overrides(data, overrides))


def run_job(config: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Run a training job with the API's :class:`rockroll.api.jobs.JobContext`; return the final metrics."""
    from rockroll.trainer.pipeline import run_training

    cfg = config_for_job(config)
    ctx.log(
        f"train {cfg.name}: {cfg.algo.adv_estimator}/{cfg.algo.pg_variant} on {cfg.rollout.env_id}, {cfg.total_steps} steps"
    )

    def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
        keep = {
            k: v
            for k, v in metrics.items()
            if k.startswith(("env/", "eval/", "actor/pg_loss", "actor/kl", "critic/value_loss"))
        }
        ctx.report(progress=(step + 1) / max(total, 1), metrics={"step": step, **keep})
        ctx.check()  # raises Cancelled: the run stops after this step

    summary = run_training(cfg, on_step)
    out = {k: v for k, v in summary.items() if isinstance(v, (int, float))}
    out["run_dir"] = summary["run_dir"]
    ctx.log(f"success before RL {summary.get('success_start', float('nan')):.3f}, after {summary['success_end']:.3f}")
    return out
