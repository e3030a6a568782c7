"""Keep the best policy by held-out validation success (the known failure of RL after a warm start is
entropy collapse that slides success back down: the run's last step is not always its best).

Validation seeds lie apart from training seeds (below ``eval_seed_offset``) and from the reported eval
seeds, so choosing a checkpoint on them does not flatter the reported held-out numbers.

Where the env has an exact evaluator (:func:`rockroll.trainer.evaluation.exact.exact_validator`) the policy
is scored exactly on the validation maps, with no sampling noise; otherwise by played greedy episodes. Ties
go to the later step: a later policy has learnt more, and equal scores are noise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.rollout.base import Rollout

__all__ = ["BestCheckpoint", "run_notes", "select_seeds", "selection_summary", "SELECT_SEED_GAP"]

#: validation seeds start this far above the eval seeds
SELECT_SEED_GAP = 500_000


def select_seeds(cfg: TrainConfig) -> list[int]:
    """The validation seeds of ``cfg`` (``rollout.select_episodes`` of them; none when 0)."""
    r = cfg.rollout
    start = r.eval_seed_offset + max(r.eval_episodes, SELECT_SEED_GAP)
    return list(range(start, start + r.select_episodes))


class BestCheckpoint:
    """The policy weights with the best validation success seen so far (a CPU copy; ties: the later step).

    ``exact(rollout, seeds) -> {"select/<tag>/success": ...}``: an exact evaluator used instead of played
    episodes (None: ``rollout.evaluate``). ``last_step``/``last_success``: the latest validation's.
    """

    def __init__(self, seeds: list[int], exact: Callable[[Any, list[int]], dict[str, float]] | None = None) -> None:
        self.seeds = seeds
        self.exact = exact
        self.success = -1.0
        self.step: int | None = None
        self.weights: dict[str, Any] | None = None
        self.last_step: int | None = None
        self.last_success: float | None = None

    def consider(self, rollout: Rollout, step: int, weights: dict[str, Any]) -> dict[str, float]:
        """Score the current policy on the validation seeds; keep its weights when it is at least as good as
        the best so far (a tie goes to the later step)."""
        if not self.seeds:
            return {}
        metrics = self.exact(rollout, self.seeds) if self.exact is not None else rollout.evaluate(self.seeds, "select")
        return self.record(step, metrics, rollout.tags, {k: v.detach().cpu().clone() for k, v in weights.items()})

    def record(
        self, step: int, metrics: dict[str, float], tags: list[str], snapshot: dict[str, Any]
    ) -> dict[str, float]:
        """Take ``step``'s validation ``metrics``; keep ``snapshot`` (a CPU copy of its weights) when it is at
        least as good as the best so far. The metrics to log."""
        from rockroll.trainer.rollout.multiturn import mean_success

        success = mean_success(metrics, "select", tags)  # several envs: the mean of their successes
        self.last_step, self.last_success = step, success
        if success >= self.success:
            self.success, self.step, self.weights = success, step, snapshot
        out = {k: v for k, v in metrics.items() if k.endswith("/success")}
        out["select/best" if len(tags) > 1 else f"select/{tags[0]}/best"] = self.success
        return out


def selection_summary(best: BestCheckpoint, last_step: int) -> dict[str, Any]:
    """What the run's summary records of the choice: the exported step and its validation score, the last
    validated step's, and whether the scores were exact (empty without validation)."""
    if best.step is None:
        return {}
    return {
        "select_exact": best.exact is not None,
        "select_best_step": best.step,
        "select_best_success": best.success,
        "select_last_step": best.last_step if best.last_step is not None else last_step,
        "select_last_success": best.last_success,
    }


def run_notes(summary: dict[str, Any], cfg: TrainConfig) -> str:
    """Lines after the report's table: the exported step next to the last one, and a format-collapse
    warning when answers hit the token cap (``rollout.cap_hit_warn``)."""
    lines = []
    if "select_best_step" in summary:
        how = "exact validation" if summary["select_exact"] else "played validation"
        lines.append(
            f"Exported step {summary['select_best_step'] + 1}: {how} {summary['select_best_success']:.1%} on "
            f"{cfg.rollout.select_episodes} maps; last validated step {summary['select_last_step'] + 1}: "
            f"{summary['select_last_success']:.1%} (ties go to the later step)."
        )
    elif "steps" in summary:
        lines.append(
            f"Exported the last step ({summary['steps']}): no validation chose one (rollout.select_episodes is 0)."
        )
    if summary.get("cap_hit_steps"):
        lines.append(
            f"WARNING: on {summary['cap_hit_steps']} steps (the first: step {summary['cap_hit_first_step'] + 1}) "
            f"more than {cfg.rollout.cap_hit_warn:.0%} of answers hit the token cap (max "
            f"{summary['cap_hit_max']:.0%}): a format collapse (rollout/cap_hit_share)."
        )
    return "".join("\n\n" + line for line in lines)
