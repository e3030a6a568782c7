"""Turns merged while their rows are built (:func:`merged_turn_rows`) give what building every row and then merging
identical ones gives (:func:`turn_rows` + :func:`merge_identical`): rows, advantages, weights, tags and metrics."""

from __future__ import annotations

import random

import pytest

from rockroll.agentrl.trajectory import Trajectory, Turn
from rockroll.trainer.config import AlgoConfig
from rockroll.trainer.learner.turns import merge_identical, merged_turn_rows, turn_rows


def _batch(seed: int) -> list[Trajectory]:
    """Groups of episodes over a few shared states (cells) and moves, so that many turns repeat exactly."""
    rng = random.Random(seed)
    trajs = []
    for g in range(4):
        for e in range(6):
            t = Trajectory(f"g{g}/{e}", f"g{g}", "FrozenLake-v0", seed=g, env_tag="lake" if g % 2 else "")
            for _ in range(rng.randint(1, 6)):
                cell = rng.randint(0, 3)
                move = rng.randint(0, 3)
                state = f"map{g}-cell{cell}"
                prompt = [1, 10 + g, 20 + cell, 2]
                response = [30 + move, 3] if rng.random() > 0.05 else []
                logprobs = [-rng.random() for _ in response]
                t.turns.append(Turn(prompt, response, logprobs, 0, state_key=state, action_is_valid=rng.random() > 0.1))
            t.success = rng.random() < 0.4
            t.final_reward = float(t.success)
            t.failure = None
            trajs.append(t)
    return trajs


@pytest.mark.parametrize("credit", ["gigpo", "episode"])
@pytest.mark.parametrize("dynamic", [True, False])
def test_merging_while_building_equals_building_then_merging(credit: str, dynamic: bool) -> None:
    algo = AlgoConfig(turn_credit=credit, dynamic_sampling=dynamic)
    for seed in range(5):
        trajs = _batch(seed)
        want = merge_identical(turn_rows(trajs, algo, "per_turn"))
        got = merged_turn_rows(trajs, algo)
        assert len(got.samples) < sum(len(t.turns) for t in trajs)  # turns did repeat
        assert got.samples == want.samples
        assert [len(r) for r in got.advantages] == [len(r) for r in want.advantages]
        assert [a for r in got.advantages for a in r] == pytest.approx([a for r in want.advantages for a in r])
        assert got.weights == want.weights and got.tags == want.tags
        assert got.returns is None and want.returns is None
        assert got.metrics.keys() == want.metrics.keys()
        for k, v in want.metrics.items():
            assert got.metrics[k] == pytest.approx(v), k


def test_no_kept_episode_gives_no_rows() -> None:
    assert merged_turn_rows([], AlgoConfig()).samples == []
