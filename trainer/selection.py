"""Keep the best policy by held-out validation success (the known failure of RL after a warm start is
entropy collapse that slides success back down: the run's last step is not always its best).

Validation seeds lie apart from training seeds (below ``eval_seed_offset``) and from the reported eval
seeds, so choosing a checkpoint on them does not flatter the reported held-out numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.rollouts import Rollout

__all__ = ["BestCheckpoint", "select_seeds", "SELECT_SEED_GAP"]

#: validation seeds start this far above the eval seeds
SELECT_SEED_GAP = 500_000


def select_seeds(cfg: TrainConfig) -> list[int]:
    """The validation seeds of ``cfg`` (``rollout.select_episodes`` of them; none when 0)."""
    r = cfg.rollout
    start = r.eval_seed_offset + max(r.eval_episodes, SELECT_SEED_GAP)
    return list(range(start, start + r.select_episodes))


class BestCheckpoint:
    """The policy weights with the best validation success seen so far (a CPU copy)."""

    def __init__(self, seeds: list[int]) -> None:
        self.seeds = seeds
        self.success = -1.0
        self.step: int | None = None
        self.weights: dict[str, Any] | None = None

    def consider(self, rollout: Rollout, step: int, weights: dict[str, Any]) -> dict[str, float]:
        """Score the current policy on the validation seeds; keep its weights when it is the best so far."""
        from rockroll.trainer.multiturn import mean_success

        if not self.seeds:
            return {}
        metrics = rollout.evaluate(self.seeds, "select")
        success = mean_success(metrics, "select", rollout.tags)  # several envs: the mean of their successes
        if success > self.success:
            self.success, self.step = success, step
            self.weights = {k: v.detach().cpu().clone() for k, v in weights.items()}
        out = {k: v for k, v in metrics.items() if k.endswith("/success")}
        out["select/best" if len(rollout.tags) > 1 else f"select/{rollout.tags[0]}/best"] = self.success
        return out
