"""Training: the GRPO/PPO family on TrainSample batches, in-process or on Ray workers with torch.

Layout (one concept per module; torch, ray and transformers are imported lazily):

* :mod:`rockroll.trainer.algos`: algorithm math (advantages, policy losses, KL, aggregation, shaping).
* :mod:`rockroll.trainer.config` / :mod:`rockroll.trainer.config_io`: typed config, YAML, ``key=value`` overrides.
* :mod:`rockroll.trainer.batch`: collate ``TrainSample`` rows, token-aligned logprobs and values.
* :mod:`rockroll.trainer.actor`: the update (PPO epochs, minibatches, grad clipping, optimizer, schedule).
* :mod:`rockroll.trainer.prepare`: rewards -> masks -> advantages for a batch.
* :mod:`rockroll.trainer.strategies`: torch (default) or DeepSpeed (optional extra, ZeRO 0-3) update engine.
* :mod:`rockroll.trainer.workers` / :mod:`rockroll.trainer.ray_workers`: actor/reference/critic/engine roles.
* :mod:`rockroll.trainer.plan_rollout`, :mod:`rockroll.trainer.sft`, :mod:`rockroll.trainer.evaluate`: rollout, warm start, eval.
* :mod:`rockroll.trainer.pipeline`: the controller loop and :func:`run_training` (CLI and jobs API).
* :mod:`rockroll.trainer.checkpoint`, :mod:`rockroll.trainer.metrics`, :mod:`rockroll.trainer.plot`: state and observability.
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
