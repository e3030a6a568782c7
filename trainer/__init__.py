"""Training: the GRPO/PPO family on TrainSample batches, in-process or on Ray workers with torch.

Layout: packages by role (torch, ray and transformers are imported lazily):

* :mod:`rockroll.trainer.config` / :mod:`rockroll.trainer.config_io`: typed config, YAML, ``key=value`` overrides.
* :mod:`rockroll.trainer.pipeline`: the controller loop and :func:`run_training` (CLI and jobs API).
* :mod:`rockroll.trainer.rollout`: the rollout boundary (``base.Rollout``), multi-turn and plan rollouts,
  the rollout config, the engine and its weight sync, where the envs live.
* :mod:`rockroll.trainer.learner`: batches, advantages, the actor/critic/reference update, workers (local
  or Ray), the supervised warm start.
* :mod:`rockroll.trainer.algos`: algorithm math (advantages, policy losses, KL, aggregation, shaping).
* :mod:`rockroll.trainer.strategies`: torch (default) or DeepSpeed (optional extra, ZeRO 0-3) update engine.
* :mod:`rockroll.trainer.evaluation`: held-out evaluation, exact validation, checkpoint selection, report.
* :mod:`rockroll.trainer.run`: checkpoints, export, metrics, plots, progress, the jobs API's train entry.
"""

from __future__ import annotations

if __name__ != "rockroll.trainer":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.trainer, not {__name__}: rockroll's packages live in the rockroll namespace")

from typing import Any

__all__ = ["run_training", "load_config", "TrainConfig"]


def __getattr__(name: str) -> Any:
    if name == "run_training":
        from rockroll.trainer.pipeline import run_training

        return run_training
    if name == "load_config":
        from rockroll.trainer.config_io import load_config

        return load_config
    if name == "TrainConfig":
        from rockroll.trainer.config import TrainConfig

        return TrainConfig
    raise AttributeError(f"module 'trainer' has no attribute {name!r}")
