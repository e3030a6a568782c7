"""The trainer's one boundary to the rollout: :class:`Rollout`.

The training loop (:func:`rockroll.trainer.pipeline.run_training`) sees the rollout only through
these calls, whichever mode plays the episodes:

* ``next_batch(step)`` -> ``(trajectories, metrics)``: the step's complete groups of unmasked
  episodes (token ids, response masks, the engine's logprobs, rewards, weight versions) and the
  rollout's metrics (``rollout/...``: infra failures, masked episodes, ``rollout/engine_restarts``).
* ``evaluate(seeds, prefix)`` -> ``{"<prefix>/<tag>/success": ..., ...}``: greedy episodes on seeds.
* ``release()``: the trainer is about to update (the engine may sleep meanwhile, where it can).
* ``update_weights(weights, version)`` -> sync metrics: the engine generates with ``weights`` from now on.
* ``close()``.

Three implementations: :class:`rockroll.trainer.rollout.plan_driver.PlanDriver` (``rollout.mode: plan``),
:class:`rockroll.trainer.rollout.multiturn.MultiTurnDriver` (``multiturn``: agentrl's scheduler) and
:class:`rockroll.trainer.rollout.rlvr.RLVRRollout` (``rlvr``: one answer per prompt, a verifiable reward).
:func:`rockroll.trainer.rollout.setup.make_rollout` builds the run's, with its engine from
``rollout.engine``.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rockroll.agentrl.trajectory import Trajectory

__all__ = ["Rollout"]


class Rollout(abc.ABC):
    """What the training loop calls (see the module docstring). ``tags``: the metric tag of each env."""

    tags: list[str]

    @abc.abstractmethod
    def next_batch(self, step: int) -> tuple[list[Trajectory], dict[str, float]]:
        """The trajectories of training step ``step`` and the rollout's metrics."""

    @abc.abstractmethod
    def evaluate(self, seeds: list[int], prefix: str = "eval") -> dict[str, float]:
        """Greedy success on ``seeds`` (``<prefix>/<tag>/success``, split by difficulty)."""

    @abc.abstractmethod
    def update_weights(self, weights: Any, version: int) -> dict[str, float]:
        """Load the policy's new ``weights`` into the engine as ``version``; the sync's metrics."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the rollout and its engine."""

    def release(self) -> None:  # noqa: B027 - optional: a rollout without an engine to put to sleep keeps it
        """The trainer updates now: nothing is generated until :meth:`update_weights`."""

    def start_at(self, step: int, pending: Any = None) -> None:  # noqa: B027 - optional (resume)
        """A resumed run: the first batch is step ``step``'s; ``pending`` is what :meth:`pending` gave."""

    def pending(self) -> Any:
        """Work made ahead of the loop that a checkpoint keeps (plan mode's prefetched batch); None."""
        return None
