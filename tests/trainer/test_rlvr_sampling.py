"""Dynamic sampling that refills (trainer/rollout/rlvr_sampling.py), against scripted draws."""

from __future__ import annotations

import pytest

from rockroll.agentrl.trajectory import FailureTag, Trajectory, Turn
from rockroll.trainer.rollout.rlvr_sampling import SamplingPlan, fill_batch, has_variance


def answer(reward: float, *, cut: bool = False, infra: bool = False, gid: str = "g") -> Trajectory:
    turn = Turn([1, 2], [3], [-0.5], 0, reward=reward, finish_reason="length" if cut else "stop")
    failure = FailureTag("infra", "reward", "RewardInfraFailure", "boom") if infra else None
    return Trajectory("e", gid, "rlvr:test", 0, env_tag="math", turns=[turn], final_reward=reward, failure=failure)


class Script:
    """A draw that hands out prepared groups in order, recording how many groups each try asked for."""

    def __init__(self, groups: list[list[Trajectory]]) -> None:
        self.groups, self.asked = list(groups), []

    def __call__(self, attempt: int, n: int) -> list[list[Trajectory]]:
        assert attempt == len(self.asked)  # tries are numbered in order
        self.asked.append(n)
        out, self.groups = self.groups[:n], self.groups[n:]
        return out


def mixed(gid: str) -> list[Trajectory]:
    return [answer(1.0, gid=gid), answer(0.0, gid=gid)]


def uniform(gid: str, reward: float = 0.0) -> list[Trajectory]:
    return [answer(reward, gid=gid), answer(reward, gid=gid)]


def test_refills_until_the_batch_holds_groups_with_a_signal() -> None:
    script = Script([uniform("a"), mixed("b"), uniform("c", 1.0), uniform("d"), mixed("e"), mixed("f"), mixed("g")])
    trajs, m = fill_batch(script, SamplingPlan(groups=3, group_size=2, oversample=1.0, max_tries=5))
    assert [t.group_id for t in trajs] == ["b", "b", "e", "e", "f", "f"]
    assert script.asked == [3, 2, 1]  # each try asks for the groups still missing
    assert m["rollout/sampling_tries"] == 3
    assert m["rollout/groups_drawn"] == 6 and m["rollout/groups_uniform"] == 3
    assert m["rollout/kept_share"] == pytest.approx(3 / 6)
    assert m["rollout/groups_kept"] == 3 and m["rollout/groups_short"] == 0


def test_the_cap_on_tries_sends_a_short_batch() -> None:
    script = Script([uniform(str(i)) for i in range(10)] + [mixed("late")])
    trajs, m = fill_batch(script, SamplingPlan(groups=2, group_size=2, oversample=1.5, max_tries=2))
    assert trajs == []
    assert script.asked == [3, 3]  # ceil(2 x 1.5) each time: nothing was kept
    assert m["rollout/sampling_tries"] == 2 and m["rollout/groups_short"] == 2 and m["rollout/kept_share"] == 0


def test_oversampled_surplus_counts_as_passed_but_stays_out() -> None:
    script = Script([mixed("a"), mixed("b"), mixed("c")])
    trajs, m = fill_batch(script, SamplingPlan(groups=2, group_size=2, oversample=1.5, max_tries=3))
    assert {t.group_id for t in trajs} == {"a", "b"}
    assert m["rollout/sampling_tries"] == 1 and m["rollout/kept_share"] == 1.0 and m["rollout/groups_kept"] == 2


def test_without_dynamic_sampling_uniform_groups_are_kept() -> None:
    trajs, m = fill_batch(Script([uniform("a"), uniform("b")]), SamplingPlan(groups=2, group_size=2, dynamic=False))
    assert len(trajs) == 4 and m["rollout/groups_uniform"] == 0


def test_masked_and_filtered_answers_give_way_to_the_spares() -> None:
    group = [answer(1.0, infra=True), answer(1.0, cut=True), answer(1.0), answer(0.0), answer(1.0)]
    plan = SamplingPlan(groups=1, group_size=2, filter_overlong=True)
    trajs, m = fill_batch(Script([group]), plan)
    assert trajs == group[2:4]  # the first two usable, in order; never the masked or the cut one
    assert m["rollout/answers_masked"] == 1 and m["rollout/overlong_share"] == pytest.approx(1 / 5)
    assert m["rollout/infra_failures"] == 1


def test_a_group_short_of_usable_answers_fails_and_is_replaced() -> None:
    short = [answer(1.0, infra=True, gid="x"), answer(0.0, gid="x")]
    trajs, m = fill_batch(Script([short, mixed("y")]), SamplingPlan(groups=1, group_size=2, max_tries=2))
    assert {t.group_id for t in trajs} == {"y"}
    assert m["rollout/groups_failed"] == 1 and m["rollout/sampling_tries"] == 2


def test_overlong_answers_count_without_filtering() -> None:
    group = [answer(0.0, cut=True), answer(1.0)]
    trajs, m = fill_batch(Script([group]), SamplingPlan(groups=1, group_size=2))
    assert trajs == group and m["rollout/overlong_share"] == 0.5


def test_variance_and_bad_plans() -> None:
    assert has_variance(mixed("a")) and not has_variance(uniform("a", 0.5))
    with pytest.raises(ValueError, match="oversample"):
        SamplingPlan(groups=1, group_size=2, oversample=0.5)
    with pytest.raises(ValueError, match="group_size"):
        SamplingPlan(groups=1, group_size=0)


@pytest.mark.parametrize(
    ("dynamic", "filter_overlong", "drawn"), [(True, False, 3), (False, True, 3), (False, False, 2)]
)
def test_the_first_draw_oversamples_only_where_groups_get_dropped(
    dynamic: bool, filter_overlong: bool, drawn: int
) -> None:
    script = Script([mixed(f"g{k}") for k in range(6)])
    plan = SamplingPlan(
        groups=2, group_size=2, oversample=1.5, max_tries=2, dynamic=dynamic, filter_overlong=filter_overlong
    )
    trajs, _ = fill_batch(script, plan)
    assert script.asked == [drawn] and len(trajs) == 4
