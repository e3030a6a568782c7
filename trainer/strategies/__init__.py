"""Training strategies: how the update's backward, optimizer step and weight gathering run.

* ``torch`` (default): :class:`rockroll.trainer.actor.PolicyTrainer` with AdamW and an explicit gradient
  ``all_reduce`` across data-parallel workers.
* ``deepspeed`` (optional extra, ``pip install 'rockroll[gpu]'``):
  :class:`rockroll.trainer.strategies.deepspeed.DeepSpeedTrainer`, the same update run through DeepSpeed
  engines (ZeRO stage 0-3, bf16/fp16, clipping and accumulation from ``optim``).

:func:`make_trainer` picks one from ``workers.strategy``; deepspeed is imported only then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig

__all__ = ["make_trainer", "require_deepspeed", "DEEPSPEED_MISSING"]

DEEPSPEED_MISSING = (
    "workers.strategy 'deepspeed' needs deepspeed, which is not installed: "
    "pip install 'rockroll[gpu]' (or pip install deepspeed); or set workers.strategy: torch"
)


def require_deepspeed() -> Any:
    """Import and return ``deepspeed``; raise ``RuntimeError`` saying how to install it when missing."""
    try:
        import deepspeed
    except ImportError as e:
        raise RuntimeError(DEEPSPEED_MISSING) from e
    return deepspeed


def make_trainer(model: Any, cfg: TrainConfig, *, critic: Any = None, rank: int = 0, world: int = 1) -> Any:
    """The policy trainer of ``workers.strategy`` for ``model`` (and ``critic``) on rank ``rank`` of ``world``."""
    from rockroll.trainer.workers import total_updates

    kwargs = dict(total_updates=total_updates(cfg), critic=critic, rank=rank, world=world, seed=cfg.seed)
    if cfg.workers.strategy == "deepspeed":
        require_deepspeed()
        from rockroll.trainer.strategies.deepspeed import DeepSpeedTrainer

        return DeepSpeedTrainer(model, cfg.algo, cfg.optim, workers=cfg.workers, dtype=cfg.model.dtype, **kwargs)
    from rockroll.trainer.actor import PolicyTrainer

    return PolicyTrainer(model, cfg.algo, cfg.optim, **kwargs)
