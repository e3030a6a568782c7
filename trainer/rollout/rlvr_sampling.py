"""Dynamic sampling that refills (DAPO's): keep drawing groups until the batch holds enough that teach.

A GRPO group whose answers all earn the same reward has zero advantage everywhere: it costs a
forward and backward pass and teaches nothing. :func:`fill_batch` draws groups through ``draw(try,
n)``, keeps the first ``group_size`` usable answers of each group (an answer masked by an infra
failure is never usable; with ``overlong: filter`` neither is one that hit the token cap), drops a
group that has too few of them (``groups_failed``) and, with ``dynamic``, one whose usable answers all
earned the same reward (``groups_uniform``), and draws again (``ceil(missing x oversample)`` groups; without ``dynamic`` or the overlong filter,
``missing`` groups: nothing but an infra failure drops one) until
``groups`` groups are kept or ``max_tries`` draws were made. A batch that is still short goes as it
is (``rollout/groups_short``): the step then trains on fewer groups, or on none.

Metrics: ``rollout/sampling_tries`` (draws this batch), ``rollout/kept_share`` (the share of drawn groups
that passed: enough usable answers, and a reward spread with ``dynamic``; the surplus of the last draw
included), ``rollout/groups_kept`` (in the batch), ``rollout/groups_drawn``, ``rollout/groups_uniform``, ``rollout/groups_failed``, ``rollout/groups_short``,
``rollout/overlong_share`` (answers that hit the cap / drawn), ``rollout/answers_masked``,
``rollout/infra_retries``, ``rollout/infra_failures``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rockroll.agentrl.trajectory import Trajectory

__all__ = ["Draw", "SamplingPlan", "fill_batch", "has_variance", "overlong"]

#: ``draw(try_index, groups) -> groups`` of answers (each group: its answers, usable or not, in order)
Draw = Callable[[int, int], Sequence[Sequence["Trajectory"]]]


@dataclass(frozen=True)
class SamplingPlan:
    """What a batch needs: ``groups`` groups of ``group_size`` usable answers (see the module docstring)."""

    groups: int
    group_size: int
    oversample: float = 1.0
    max_tries: int = 1
    dynamic: bool = True
    filter_overlong: bool = False

    def __post_init__(self) -> None:
        if self.groups < 1 or self.group_size < 1:
            raise ValueError(f"groups and group_size must be >= 1, got {self.groups} and {self.group_size}")
        if self.oversample < 1 or self.max_tries < 1:
            raise ValueError(f"oversample must be >= 1 and max_tries >= 1, got {self.oversample}, {self.max_tries}")

    @property
    def draw_factor(self) -> float:
        """``oversample`` where groups get dropped for their rewards or lengths; else 1 (only a group an infra
        failure left short is dropped, and the next try draws its replacement)."""
        return self.oversample if self.dynamic or self.filter_overlong else 1.0


def overlong(traj: Trajectory) -> bool:
    """Whether the answer was cut at the token cap."""
    return any(t.finish_reason == "length" for t in traj.turns)


def has_variance(members: Sequence[Trajectory]) -> bool:
    """Whether the answers' rewards are not all equal (a GRPO group with a signal)."""
    rewards = [t.final_reward for t in members]
    return max(rewards) - min(rewards) > 1e-9


@dataclass
class _Tally:
    tries: int = 0
    drawn: int = 0
    passed: int = 0
    failed: int = 0
    uniform: int = 0
    answers: int = 0
    overlong: int = 0
    masked: int = 0
    retries: int = 0

    def count(self, members: Sequence[Trajectory]) -> None:
        self.drawn += 1
        self.answers += len(members)
        self.overlong += sum(overlong(t) for t in members)
        self.masked += sum(t.masked for t in members)
        self.retries += sum(t.infra_retries for t in members)


def fill_batch(draw: Draw, plan: SamplingPlan) -> tuple[list[Trajectory], dict[str, float]]:
    """The batch's answers (``groups`` x ``group_size`` when full, group by group) and its sampling metrics."""
    kept: list[list[Trajectory]] = []
    tally = _Tally()
    while len(kept) < plan.groups and tally.tries < plan.max_tries:
        wanted = math.ceil((plan.groups - len(kept)) * plan.draw_factor)
        drawn = draw(tally.tries, wanted)
        tally.tries += 1
        for members in drawn:
            tally.count(members)
            usable = [t for t in members if not t.masked and not (plan.filter_overlong and overlong(t))]
            usable = usable[: plan.group_size]
            if len(usable) < plan.group_size:
                tally.failed += 1
            elif plan.dynamic and not has_variance(usable):
                tally.uniform += 1
            else:
                tally.passed += 1
                if len(kept) < plan.groups:
                    kept.append(usable)
    metrics = {
        "rollout/sampling_tries": float(tally.tries),
        "rollout/kept_share": tally.passed / max(tally.drawn, 1),
        "rollout/groups_kept": float(len(kept)),
        "rollout/groups_drawn": float(tally.drawn),
        "rollout/groups_uniform": float(tally.uniform),
        "rollout/groups_failed": float(tally.failed),
        "rollout/groups_short": float(plan.groups - len(kept)),
        "rollout/overlong_share": tally.overlong / max(tally.answers, 1),
        "rollout/answers_masked": float(tally.masked),
        "rollout/infra_retries": float(tally.retries),
        "rollout/infra_failures": float(tally.retries + tally.masked),
    }
    return [t for group in kept for t in group], metrics
