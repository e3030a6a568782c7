"""Training: the GRPO/PPO family on TrainSample batches, in-process or on Ray workers with torch.

Layout (one concept per module; torch, ray and transformers are imported lazily):

* :mod:`trainer.algos`: algorithm math (advantages, policy losses, KL, aggregation, shaping).
* :mod:`trainer.config` / :mod:`trainer.config_io`: typed config, YAML, ``key=value`` overrides.
* :mod:`trainer.batch`: collate ``TrainSample`` rows, token-aligned logprobs and values.
* :mod:`trainer.actor`: the update (PPO epochs, minibatches, grad clipping, optimizer, schedule).
* :mod:`trainer.prepare`: rewards -> masks -> advantages for a batch.
* :mod:`trainer.strategies`: torch (default) or DeepSpeed (optional extra, ZeRO 0-3) update engine.
* :mod:`trainer.workers` / :mod:`trainer.ray_workers`: actor/reference/critic/engine roles.
* :mod:`trainer.plan_rollout`, :mod:`trainer.sft`, :mod:`trainer.evaluate`: rollout, warm start, eval.
* :mod:`trainer.pipeline`: the controller loop and :func:`run_training` (CLI and jobs API).
* :mod:`trainer.checkpoint`, :mod:`trainer.metrics`, :mod:`trainer.plot`: state and observability.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_training", "load_config", "TrainConfig"]


def __getattr__(name: str) -> Any:
    if name == "run_training":
        from trainer.pipeline import run_training

        return run_training
    if name == "load_config":
        from trainer.config_io import load_config

        return load_config
    if name == "TrainConfig":
        from trainer.config import TrainConfig

        return TrainConfig
    raise AttributeError(f"module 'trainer' has no attribute {name!r}")
