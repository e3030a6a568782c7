"""Held-out metrics split by the env's difficulty and category, and the report table built from them."""

from __future__ import annotations

from rockroll.agentrl.trajectory import FailureTag, Trajectory, Turn
from rockroll.trainer.evaluation.report import success_table
from rockroll.trainer.rollout.multiturn import success_metrics


def _traj(seed: int, success: bool, turns: int, reward: float, masked: bool = False) -> Trajectory:
    t = Trajectory(f"e{seed}", f"g{seed}", "ALFWorld-v0", seed, env_tag="alf")
    t.turns = [Turn([1], [2], [0.0], 0) for _ in range(turns)]
    t.success, t.final_reward = success, reward
    if masked:
        t.failure = FailureTag("infra", "env_step", "SandboxLost", "gone")
    return t


def test_success_split_by_difficulty_and_category_with_reward_and_turns() -> None:
    trajs = [_traj(0, True, 4, 1.0), _traj(1, False, 10, 0.5), _traj(2, True, 6, 1.0), _traj(3, False, 2, 0.0, True)]
    kinds = {0: "pick", 1: "pick", 2: "heat", 3: "heat"}
    m = success_metrics(trajs, "eval", "alf", lambda s: 1 + s % 2, kinds.get)
    assert m["eval/alf/success"] == 2 / 3  # the masked episode is not scored
    assert m["eval/alf/masked"] == 1.0
    assert m["eval/alf/reward"] == 2.5 / 3
    assert m["eval/alf/turns"] == 20 / 3
    assert (m["eval/alf/success_len1"], m["eval/alf/n_len1"]) == (1.0, 2.0)
    assert (m["eval/alf/success_len2"], m["eval/alf/n_len2"]) == (0.0, 1.0)
    assert (m["eval/alf/success_cat_pick"], m["eval/alf/n_cat_pick"]) == (0.5, 2.0)
    assert (m["eval/alf/success_cat_heat"], m["eval/alf/n_cat_heat"]) == (1.0, 1.0)
    assert not any("cat_" in k for k in success_metrics(trajs, "eval", "alf", lambda s: None))


def test_report_table_has_a_row_per_category() -> None:
    start = success_metrics([_traj(0, False, 4, 0.0), _traj(1, False, 4, 0.0)], "eval", "alf", lambda s: None,
                            {0: "pick", 1: "heat"}.get)  # fmt: skip
    end = success_metrics([_traj(0, True, 4, 1.0), _traj(1, False, 4, 0.0)], "eval", "alf", lambda s: None,
                          {0: "pick", 1: "heat"}.get)  # fmt: skip
    table = success_table({"eval_start": start, "eval_end": end}, "alf", maps=2)
    lines = table.splitlines()
    assert lines[2] == "| all | 2 | 0.0% | 50.0% |"
    assert "| heat | 1 | 0.0% | 0.0% |" in lines
    assert "| pick | 1 | 0.0% | 100.0% |" in lines
