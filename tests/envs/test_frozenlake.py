"""FrozenLake: map generation, rules, slipping, symbols, errors."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rockroll.envhub as envhub
from rockroll.envs.errors import EnvConfigError
from rockroll.envs.frozenlake import FrozenLakeEnv, generate_map, shortest_path
from rockroll.envs.play import play_episode


@pytest.mark.parametrize("size", [4, 8])
def test_a_thousand_generated_maps_are_all_solvable(size: int) -> None:
    rng = np.random.default_rng(123)
    for _ in range(1000):
        grid = generate_map(size, 0.8, rng)
        assert len(grid) == size and all(len(row) == size for row in grid)
        assert sum(row.count("S") for row in grid) == 1 and sum(row.count("G") for row in grid) == 1
        assert shortest_path(grid) is not None


def test_expert_plan_reaches_the_goal_without_slipping() -> None:
    env = envhub.make("FrozenLake-v0", size=4, is_slippery=False)
    for seed in range(200):
        env.reset(seed=seed)
        plan = shortest_path(env.unwrapped.grid)
        for i, move in enumerate(plan):
            obs, reward, terminated, truncated, info = env.step(f"<answer>{move}</answer>")
            assert info["action_is_valid"] and info["action_is_effective"]
            assert terminated == (i == len(plan) - 1)
        assert reward == 1.0 and info["success"] and "√" in obs and "P" not in obs


def test_render_symbols_and_hole() -> None:
    env = FrozenLakeEnv(size=3, is_slippery=False)
    env.reset(seed=0)
    env.set_state({**env.get_state(), "data": {"grid": ["SHF", "FFF", "FFG"], "row": 0, "col": 0}})
    assert env.render() == "PO_\n___\n__G"
    obs, reward, terminated, _, info = env.step("<answer>right</answer>")
    assert obs == "_X_\n___\n__G"
    assert reward == 0.0 and terminated and not info["success"]


def test_moving_into_the_edge_is_valid_but_not_effective() -> None:
    env = FrozenLakeEnv(size=3, is_slippery=False)
    env.reset(seed=0)
    env.set_state({**env.get_state(), "data": {"grid": ["SFF", "FFF", "FFG"], "row": 0, "col": 0}})
    obs, reward, terminated, _, info = env.step("<answer>Up</answer>")
    assert info["action_is_valid"] and not info["action_is_effective"] and reward == 0.0 and not terminated


def test_slipping_follows_the_one_in_three_rule() -> None:
    env = FrozenLakeEnv(size=5, is_slippery=True)
    env.reset(seed=0)
    moves: Counter[tuple[int, int]] = Counter()
    base = {"grid": ["FFFFF", "FFFFF", "FFSFF", "FFFFF", "FFFFG"], "row": 2, "col": 2}
    state = env.get_state()
    for _ in range(3000):
        env.set_state({**state, "rng": env.get_state()["rng"], "data": base})
        env.step("<answer>Down</answer>")
        moves[(env.unwrapped.row - 2, env.unwrapped.col - 2)] += 1
    assert set(moves) == {(1, 0), (0, -1), (0, 1)}, "Down slips only to Left or Right, never Up"
    for count in moves.values():
        assert abs(count / 3000 - 1 / 3) < 0.04


def test_step_limit_truncates_at_twenty() -> None:
    env = envhub.make("FrozenLake-v0")
    env.reset(seed=0)
    for i in range(20):
        _, _, terminated, truncated, _ = env.step("no answer")
        assert not terminated and truncated == (i == 19)


def test_expert_beats_random() -> None:
    env = envhub.make("FrozenLake-v0", is_slippery=False)
    expert = [play_episode(env, "expert", s).success for s in range(100)]
    rand = [play_episode(env, "random", s).success for s in range(100)]
    assert sum(expert) == 100
    assert sum(rand) < 60


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"size": 0}, "size"),
        ({"size": 1}, "size"),
        ({"size": 4.5}, "size"),
        ({"p": 0}, "p"),
        ({"p": 1.5}, "p"),
        ({"is_slippery": "yes"}, "is_slippery"),
        ({"format_penalty": float("nan")}, "format_penalty"),
        ({"max_steps": 0}, "max_steps"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_kwargs_raise_env_config_error(kwargs: dict, param: str) -> None:
    with pytest.raises(EnvConfigError) as err:
        envhub.make("FrozenLake-v0", **kwargs)
    assert err.value.param == param
    assert param in str(err.value)
