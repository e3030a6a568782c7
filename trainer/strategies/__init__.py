"""Training strategies: how the update's backward, optimizer step and weight gathering run.

* ``torch`` (default): :class:`rockroll.trainer.learner.actor.PolicyTrainer` with AdamW and an explicit gradient
  ``all_reduce`` across data-parallel workers.
* ``deepspeed`` (optional extra, ``pip install 'rockroll[gpu]'``):
  :class:`rockroll.trainer.strategies.deepspeed.DeepSpeedTrainer`, the same update run through DeepSpeed
  engines (ZeRO stage 0-3, bf16/fp16, clipping and accumulation from ``optim``).

:func:`make_trainer` picks one from ``workers.strategy``; the ``deepspeed`` package is imported only then
(:mod:`rockroll.trainer.strategies.common`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rockroll.trainer.learner.actor import PolicyTrainer, total_updates
from rockroll.trainer.strategies.common import DEEPSPEED_MISSING, require_deepspeed
from rockroll.trainer.strategies.deepspeed import DeepSpeedTrainer

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig

__all__ = ["make_trainer", "require_deepspeed", "DEEPSPEED_MISSING"]


def make_trainer(model: Any, cfg: TrainConfig, *, critic: Any = None, rank: int = 0, world: int = 1) -> Any:
    """The policy trainer of ``workers.strategy`` for ``model`` (and ``critic``) on rank ``rank`` of ``world``."""
    kwargs = dict(total_updates=total_updates(cfg), critic=critic, rank=rank, world=world, seed=cfg.seed)
    if cfg.workers.strategy == "deepspeed":
        require_deepspeed()
        return DeepSpeedTrainer(model, cfg.algo, cfg.optim, workers=cfg.workers, dtype=cfg.model.dtype, **kwargs)
    return PolicyTrainer(model, cfg.algo, cfg.optim, **kwargs)
