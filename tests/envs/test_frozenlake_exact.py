"""Exact FrozenLake references: hand-computed tiny maps, Monte Carlo against the real env, orderings."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import rockroll.envhub as envhub
from rockroll.envs.frozenlake import shortest_path
from rockroll.envs.frozenlake.exact import (
    action_values,
    best_blind_plan,
    best_blind_success,
    blind_success,
    expert_policy,
    map_for_seed,
    noslip_plan_blind_success,
    optimal_policy,
    optimal_success,
    policy_success,
    random_success,
    references,
)
from rockroll.envs.frozenlake.expert import next_action
from rockroll.envs.frozenlake.maps import ACTIONS

# Open 2x2: S(0,0) F(0,1) / F(1,0) G(1,1). G is diagonal to S, so no 1-step success.
OPEN = ("SF", "FG")
# 2x2 with a hole under the start: S(0,0) G(0,1) / H(1,0) F(1,1).
LEDGE = ("SG", "HF")


# ------------------------------------------------------------------------------ hand-computed
def test_open_2x2_by_hand() -> None:
    # 1 step: G is two moves away -> 0.
    assert optimal_success(OPEN, 1) == 0.0
    # With 1 step left, from (0,1) Down reaches G w.p. 1/3 (Left/Right slip: S or stay) -> V1 = 1/3,
    # same from (1,0) with Right. From S, Right goes to (0,1), slips Down to (1,0) or Up (stay):
    # V2(S) = 1/3 * 1/3 + 1/3 * 1/3 + 1/3 * 0 = 2/9.
    assert optimal_success(OPEN, 2) == pytest.approx(2 / 9, abs=1e-12)
    # 3 steps: at (0,1) with 2 left, Right is best: intended Right and slip Up bump the walls
    # (stay, V1 = 1/3), slip Down hits G: V2(0,1) = 1/3 + 2/3 * 1/3 = 5/9 (Down only gives
    # 1/3 + 1/3 * V1(S)=0 + 1/3 * 1/3 = 4/9). Same at (1,0). From S, Right: (5/9 + 5/9 + 2/9)/3 = 4/9.
    assert optimal_success(OPEN, 3) == pytest.approx(4 / 9, abs=1e-12)
    # Without slipping the two-move path fits in 2 steps.
    assert optimal_success(OPEN, 1, slippery=False) == 0.0
    assert optimal_success(OPEN, 2, slippery=False) == 1.0


def test_open_2x2_action_values_by_hand() -> None:
    q = action_values(OPEN, 3)
    assert q.shape == (4, 4, 4) and not q[0].any()
    # 1 step left at (0,1) (cell 1): Down reaches G w.p. 1/3 (values by hand above); Up/Left cannot.
    assert q[1, 1, 1] == pytest.approx(1 / 3) and q[1, 3, 1] == 0.0
    # 2 steps left at (0,1): Right 5/9 beats Down 4/9 (see test_open_2x2_by_hand).
    assert q[2, 2, 1] == pytest.approx(5 / 9) and q[2, 1, 1] == pytest.approx(4 / 9)
    # the best action's value with k steps left from S is the optimum with k steps
    for k in (1, 2, 3):
        assert q[k, :, 0].max() == pytest.approx(optimal_success(OPEN, k), abs=1e-12)


def test_open_2x2_expert_and_blind_by_hand() -> None:
    # BFS tries Left, Down, Right, Up: from S the shortest path is Down, Right.
    assert expert_policy(OPEN) == {(0, 0): 1, (0, 1): 1, (1, 0): 2}
    # 2 steps: Down from S lands on (1,0) or (0,1) w.p. 1/3 each, then 1/3 to G: 2/9 (= optimum).
    assert policy_success(OPEN, 2, expert_policy(OPEN)) == pytest.approx(2 / 9, abs=1e-12)
    # 3 steps: the expert walks Down at (0,1): V2 = 1/3 + 1/3*V1(S)=0 + 1/3*V1(0,1)=1/3 -> 4/9, same
    # at (1,0); V3(S) = (4/9 + V2(S)=2/9 + 4/9)/3 = 10/27 < the optimum 12/27.
    assert policy_success(OPEN, 3, expert_policy(OPEN)) == pytest.approx(10 / 27, abs=1e-12)
    # Blind Right, Down: after Right 1/3 on (0,1), 1/3 on (1,0), 1/3 on S; Down then reaches G from
    # (0,1) (intended) and from (1,0) (slip Right): 2/9. The no-slip plan Down, Right is its mirror.
    assert blind_success(OPEN, 2, ["Right", "Down"]) == pytest.approx(2 / 9, abs=1e-12)
    assert noslip_plan_blind_success(OPEN, 2) == pytest.approx(2 / 9, abs=1e-12)
    # The plan has two moves and is not padded: more steps do not help it.
    assert noslip_plan_blind_success(OPEN, 3) == pytest.approx(2 / 9, abs=1e-12)
    # Right, Down, Right: after two moves G 2/9, S 2/9, (0,1) 2/9, (1,0) 3/9; Right then reaches G
    # from (0,1) by slipping Down (1/3 * 2/9) and from (1,0) directly (1/3 * 3/9): 2/9 + 5/27 = 11/27.
    assert blind_success(OPEN, 3, [2, 1, 2]) == pytest.approx(11 / 27, abs=1e-12)
    # Extra moves beyond the step limit are not played.
    assert blind_success(OPEN, 2, [2, 1, 2]) == pytest.approx(2 / 9, abs=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 10])
def test_ledge_2x2_by_hand(k: int) -> None:
    # Up from S: intended Up and slip Left bump the walls, slip Right reaches G; never the hole.
    # Success within k steps = 1 - (2/3)^k, the optimum.
    assert optimal_success(LEDGE, k) == pytest.approx(1 - (2 / 3) ** k, abs=1e-12)
    assert blind_success(LEDGE, k, ["Up"] * k) == pytest.approx(1 - (2 / 3) ** k, abs=1e-12)
    assert best_blind_success(LEDGE, k) == pytest.approx(1 - (2 / 3) ** k, abs=1e-12)
    # The no-slip expert walks Right: 1/3 goal, 1/3 hole (slip Down), 1/3 stay (slip Up), again:
    # sum_i (1/3)^(i+1) = (1 - (1/3)^k) / 2.
    assert expert_policy(LEDGE) == {(0, 0): 2, (1, 1): 3}
    assert policy_success(LEDGE, k, expert_policy(LEDGE)) == pytest.approx((1 - (1 / 3) ** k) / 2, abs=1e-12)
    # The no-slip plan (Right) played blindly: 1/3 whatever the limit.
    assert noslip_plan_blind_success(LEDGE, k) == pytest.approx(1 / 3, abs=1e-12)
    # Uniform random: 1 step reaches G when the move is Right: intended (Right) or a slip (Up, Down).
    if k == 1:
        assert random_success(LEDGE, 1) == pytest.approx(3 / 4 * 1 / 3, abs=1e-12)


def test_policy_forms_agree_and_bad_policies_are_rejected() -> None:
    table = {(0, 0): "up", (1, 1): 3}
    assert policy_success(LEDGE, 4, table) == pytest.approx(1 - (2 / 3) ** 4)
    assert policy_success(LEDGE, 4, lambda r, c: "Up") == pytest.approx(1 - (2 / 3) ** 4)
    with pytest.raises(ValueError, match="no action for cell"):
        policy_success(LEDGE, 4, {(0, 0): 3})
    with pytest.raises(ValueError, match="unknown action"):
        policy_success(LEDGE, 4, lambda r, c: "jump")
    with pytest.raises(ValueError, match="one S and one G"):
        optimal_success(("FF", "FG"), 3)
    with pytest.raises(ValueError, match="steps"):
        optimal_success(OPEN, -1)


# ------------------------------------------------------------------------ maps of the real env
def test_map_for_seed_is_the_envs_map() -> None:
    env = envhub.make("FrozenLake-v0", size=4, is_slippery=True)
    for seed in (0, 7, 1_000_000, 1_000_123):
        env.reset(seed=seed)
        assert map_for_seed(seed) == env.unwrapped.grid
    env6 = envhub.make("FrozenLake-v0", size=6, is_slippery=False)
    env6.reset(seed=5)
    assert map_for_seed(5, size=6) == env6.unwrapped.grid


def test_expert_policy_is_next_action_at_every_cell() -> None:
    env = envhub.make("FrozenLake-v0", size=4, is_slippery=True)
    for seed in range(20):
        env.reset(seed=seed)
        inner = env.unwrapped
        table = expert_policy(inner.grid)
        for (row, col), action in table.items():
            inner.row, inner.col = row, col
            expected = next_action(inner)
            if expected is not None:
                assert ACTIONS[action] == expected


@pytest.mark.parametrize("seed", range(30))
def test_without_slipping_success_is_one_exactly_when_the_path_fits(seed: int) -> None:
    grid = map_for_seed(seed)
    length = len(shortest_path(grid))
    assert optimal_success(grid, length, slippery=False) == 1.0
    assert optimal_success(grid, length - 1, slippery=False) == 0.0
    assert policy_success(grid, length, expert_policy(grid), slippery=False) == 1.0
    assert noslip_plan_blind_success(grid, length, slippery=False) == 1.0
    assert best_blind_success(grid, length, slippery=False) == 1.0


def test_references_order_on_every_map_and_match_the_single_map_functions() -> None:
    eps = 1e-12
    for steps in (20, 30):
        refs = references(range(1_000_000, 1_000_100), steps=steps)
        opt, exp = np.array(refs["optimal"]), np.array(refs["expert"])
        best, noslip = np.array(refs["best_blind"]), np.array(refs["noslip_blind"])
        rand = np.array(refs["random"])
        assert (opt >= exp - eps).all() and (opt >= rand - eps).all()
        assert (opt >= best - eps).all() and (best >= noslip - eps).all()
        assert ((0 <= noslip) & (opt <= 1 + eps)).all()
        assert refs["path_len"] == [len(shortest_path(g)) for g in refs["grids"]]
        assert refs["mean"]["optimal"] == pytest.approx(opt.mean())
        assert sum(v["maps"] for v in refs["by_path_len"].values()) == 100
        for i in (0, 1, 2):
            grid = tuple(refs["grids"][i])
            assert grid == map_for_seed(refs["seeds"][i])
            assert optimal_success(grid, steps) == pytest.approx(opt[i], abs=eps)
            assert policy_success(grid, steps, expert_policy(grid)) == pytest.approx(exp[i], abs=eps)
            assert best_blind_success(grid, steps) == pytest.approx(best[i], abs=eps)
            assert noslip_plan_blind_success(grid, steps) == pytest.approx(noslip[i], abs=eps)
            value, plan = best_blind_plan(grid, steps)
            assert len(plan) <= steps and blind_success(grid, steps, plan) == pytest.approx(value, abs=eps)


@pytest.mark.parametrize("grid", [("SFF", "FHF", "FFG"), ("SFH", "FFF", "HFG"), ("FSF", "HFF", "GFH")])
def test_beam_search_finds_the_exhaustive_best_blind_plan_on_small_cases(grid: tuple[str, ...]) -> None:
    steps = 5  # 4^5 = 1024 sequences
    exhaustive = max(blind_success(grid, steps, seq) for seq in itertools.product(range(4), repeat=steps))
    assert best_blind_success(grid, steps, beam=64) == pytest.approx(exhaustive, abs=1e-12)
    assert exhaustive <= optimal_success(grid, steps) + 1e-12


# ------------------------------------------------------------------ Monte Carlo on the real env
def _play(env, base: dict, episodes: int, choose) -> float:  # noqa: ANN001 - test helper
    wins = 0
    for i in range(episodes):
        state = {**base, "env": {**base["env"], "rng": np.random.default_rng(10_000 + i).bit_generator.state}}
        env.set_state(state)
        terminated = truncated = False
        reward = 0.0
        while not (terminated or truncated):
            action = choose(env)
            if action is None:  # a blind plan shorter than the step limit has ended
                break
            _, reward, terminated, truncated, _ = env.step(f"<answer>{action}</answer>")
        wins += reward == 1.0
    return wins / episodes


def test_monte_carlo_on_the_real_env_matches_the_exact_values() -> None:
    seed, steps, episodes = 1_000_000, 20, 1500
    env = envhub.make("FrozenLake-v0", size=4, is_slippery=True)  # 20-step MaxSteps limit
    assert env.max_steps == steps
    env.reset(seed=seed)
    inner = env.unwrapped
    grid = inner.grid
    base = env.get_state()
    opt, exp = optimal_success(grid, steps), policy_success(grid, steps, expert_policy(grid))
    blind_value, blind_plan = best_blind_plan(grid, steps)
    # ('FGFF', 'FFHS', 'FFFF', 'HFFF'): optimum ~0.77, best blind ~0.57, expert ~0.17
    assert len(shortest_path(grid)) >= 3 and opt - blind_value > 0.1 and blind_value - exp > 0.1
    policy = optimal_policy(grid, steps)

    mc_opt = _play(
        env, base, episodes, lambda e: ACTIONS[policy(e.unwrapped.row, e.unwrapped.col, steps - e.elapsed_steps)]
    )
    mc_exp = _play(env, base, episodes, lambda e: next_action(e.unwrapped))
    mc_blind = _play(
        env, base, episodes, lambda e: blind_plan[e.elapsed_steps] if e.elapsed_steps < len(blind_plan) else None
    )
    for exact, mc in ((opt, mc_opt), (exp, mc_exp), (blind_value, mc_blind)):
        tol = 3 * math.sqrt(exact * (1 - exact) / episodes) + 1e-9
        assert abs(mc - exact) <= tol, (exact, mc, tol)
