"""The worker group the controller talks to: actor (train), reference, critic.

:class:`LocalWorkers` runs them in this process; :class:`rockroll.trainer.learner.ray_workers.RayWorkers` runs
the actor as ``num_workers`` data-parallel Ray actors (torch.distributed) with the same methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rockroll.trainer.learner.actor import total_updates

if TYPE_CHECKING:
    import torch

    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.learner.batch import Batch

__all__ = ["LocalWorkers", "make_workers", "total_updates"]  # total_updates lives in trainer.learner.actor


class LocalWorkers:
    """Actor, reference and critic in this process, around one :class:`PolicyTrainer`."""

    def __init__(self, model: Any, cfg: TrainConfig) -> None:
        from rockroll.trainer.learner.models import Critic, frozen_copy
        from rockroll.trainer.strategies import make_trainer

        self.ref = frozen_copy(model) if cfg.algo.kl_coef > 0 else None
        critic = Critic(model) if cfg.algo.needs_critic else None
        self.trainer = make_trainer(model, cfg, critic=critic)

    def old_logprobs(self, batch: Batch) -> torch.Tensor:
        return self.trainer.compute_logprobs(batch)

    def ref_logprobs(self, batch: Batch) -> torch.Tensor | None:
        return None if self.ref is None else self.trainer.compute_logprobs(batch, model=self.ref)

    def values(self, batch: Batch) -> torch.Tensor | None:
        return None if self.trainer.critic is None else self.trainer.compute_values(batch)

    def update(self, batch: Batch, step: int) -> dict[str, float]:
        return self.trainer.update(batch, step)

    def policy_weights(self) -> dict[str, Any]:
        return self.trainer.policy_weights(cpu=False)

    def state_dict(self) -> dict[str, Any]:
        s = self.trainer.state_dict()
        if self.ref is not None:
            s["ref"] = self.ref.state_dict()
        return s

    def load_state_dict(self, s: dict[str, Any]) -> None:
        self.trainer.load_state_dict(s)
        if self.ref is not None and "ref" in s:
            self.ref.load_state_dict(s["ref"])

    def close(self) -> None:
        return None


def make_workers(model: Any, cfg: TrainConfig) -> Any:
    """Local workers, or Ray workers when ``workers.use_ray``."""
    if cfg.workers.strategy == "deepspeed":
        from rockroll.trainer.strategies import require_deepspeed

        require_deepspeed()  # fail in the controller, with the install hint, before any worker starts
    if cfg.workers.use_ray:
        from rockroll.trainer.learner.ray_workers import RayWorkers

        return RayWorkers(model, cfg)
    return LocalWorkers(model, cfg)
