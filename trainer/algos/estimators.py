"""Advantage estimators by name (``algo.adv_estimator``): a registry over :mod:`~rockroll.trainer.algos.advantages`.

An estimator takes :class:`AdvantageInputs` and returns ``(advantages [N, T], returns [N, T] or None)``.
It declares what the trainer must prepare for it:

* ``group_based=True``: ``inputs.rewards`` are sequence rewards ``[N]`` (the KL penalty, when it is
  a reward, is summed per row and subtracted), compared within groups of ``rollout.scheduler.group_size``
  responses (which must be >= 2); dynamic sampling applies.
* ``group_based=False``: ``inputs.rewards`` are token rewards ``[N, T]`` (the sequence reward on the
  last response token, minus the per-token KL penalty when it is a reward).
* ``needs_critic=True``: the trainer builds a critic; ``inputs.values`` holds its values and the
  estimator returns the critic's targets as ``returns``.

Add one with::

    @register_advantage_estimator("my_adv", group_based=True)
    def my_adv(x: AdvantageInputs) -> tuple[torch.Tensor, None]:
        return (x.rewards - x.rewards.mean()).unsqueeze(1) * x.mask, None

then ``algo.adv_estimator: my_adv`` (import the module before the config is built).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from rockroll.envs.registries import Registry
from rockroll.trainer.algos.advantages import compute_gae, group_advantages, reinforce_pp_advantages, rloo_advantages

if TYPE_CHECKING:
    import torch

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AdvantageEstimator",
    "AdvantageInputs",
    "advantage_estimator_names",
    "get_advantage_estimator",
    "register_advantage_estimator",
]

EstimatorResult = tuple["torch.Tensor", Optional["torch.Tensor"]]


@dataclass(frozen=True)
class AdvantageInputs:
    """What an estimator reads.

    Attributes:
        rewards: ``[N]`` sequence rewards (group-based estimators) or ``[N, T]`` token rewards.
        mask: ``[N, T]`` loss mask: response tokens of the rows kept by the sample masks.
        response_mask: ``[N, T]`` response tokens of every row.
        group_ids: one group id per row.
        values: ``[N, T]`` critic values (estimators with ``needs_critic``), else None.
        gamma: discount (``algo.gamma``).
        lam: GAE lambda (``algo.lam``).
    """

    rewards: torch.Tensor
    mask: torch.Tensor
    response_mask: torch.Tensor
    group_ids: Sequence[str]
    values: torch.Tensor | None = None
    gamma: float = 1.0
    lam: float = 1.0


@dataclass(frozen=True)
class AdvantageEstimator:
    """A registered estimator: its function and what it needs (see the module docstring)."""

    name: str
    fn: Callable[[AdvantageInputs], EstimatorResult]
    group_based: bool = False
    needs_critic: bool = False

    def __call__(self, inputs: AdvantageInputs) -> EstimatorResult:
        if self.needs_critic and inputs.values is None:
            raise ValueError(f"adv_estimator {self.name!r} needs the critic's values; none were computed")
        return self.fn(inputs)


#: every estimator by name; ``algo.adv_estimator`` must be one of its names
ADVANTAGE_ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator", "adv_estimator")


def register_advantage_estimator(
    name: str, *, group_based: bool = False, needs_critic: bool = False, override: bool = False
) -> Callable[[Callable[[AdvantageInputs], EstimatorResult]], Callable[[AdvantageInputs], EstimatorResult]]:
    """Decorator: register ``fn(inputs) -> (advantages, returns | None)`` as ``algo.adv_estimator: name``.

    A taken name raises ``ValueError`` unless ``override=True``. The function is returned unchanged.
    """

    def add(fn: Callable[[AdvantageInputs], EstimatorResult]) -> Callable[[AdvantageInputs], EstimatorResult]:
        ADVANTAGE_ESTIMATORS.add(name, AdvantageEstimator(name, fn, group_based, needs_critic), override=override)
        return fn

    return add


def get_advantage_estimator(name: str) -> AdvantageEstimator:
    """The estimator registered as ``name``; else ``UnknownNameError`` (a ``ValueError``) naming close ones."""
    return ADVANTAGE_ESTIMATORS.get(name)


def advantage_estimator_names() -> tuple[str, ...]:
    """Every registered estimator name, in registration order (the allowed ``algo.adv_estimator`` values)."""
    return ADVANTAGE_ESTIMATORS.names()


@register_advantage_estimator("grpo", group_based=True)
def grpo(x: AdvantageInputs) -> EstimatorResult:
    """GRPO: ``(r - mean_g) / (std_g + eps)`` per group, on every response token."""
    return group_advantages(x.rewards, x.group_ids, norm_std=True).unsqueeze(1) * x.mask, None


@register_advantage_estimator("grpo_mean", group_based=True)
def grpo_mean(x: AdvantageInputs) -> EstimatorResult:
    """Mean-only GRPO (Dr. GRPO / RAFT++): ``r - mean_g``."""
    return group_advantages(x.rewards, x.group_ids, norm_std=False).unsqueeze(1) * x.mask, None


@register_advantage_estimator("rloo", group_based=True)
def rloo(x: AdvantageInputs) -> EstimatorResult:
    """RLOO: ``r_i - mean_{j != i} r_j`` within each group."""
    return rloo_advantages(x.rewards, x.group_ids).unsqueeze(1) * x.mask, None


@register_advantage_estimator("reinforce_pp")
def reinforce_pp(x: AdvantageInputs) -> EstimatorResult:
    """REINFORCE++: discounted token returns whitened over the batch."""
    return reinforce_pp_advantages(x.rewards, x.mask, gamma=x.gamma), None


@register_advantage_estimator("gae", needs_critic=True)
def gae(x: AdvantageInputs) -> EstimatorResult:
    """GAE over each row's response tokens with the critic's values; returns are the critic's targets."""
    if x.values is None:
        raise ValueError("adv_estimator 'gae' needs the critic's values; none were computed")
    adv, returns = compute_gae(x.rewards, x.values, x.response_mask, gamma=x.gamma, lam=x.lam)
    return adv * x.mask, returns
