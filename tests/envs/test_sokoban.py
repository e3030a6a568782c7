"""Tests of the Sokoban env, its generator and its solver (the whole file runs in seconds)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rockroll.envhub as envhub
from rockroll.envs.errors import EnvConfigError, EnvError, StateError
from rockroll.envs.sokoban import (
    ACTIONS,
    VOCABS,
    GenerationError,
    MoveResult,
    SokobanEnv,
    SolverLimitError,
    generate_room,
    max_boxes,
    parse_grid,
    render_grid,
    solve,
    step_reward,
)
from rockroll.envs.sokoban import generator as generator_module

SOKOBAN_IDS = ["Sokoban-v0", "SimpleSokoban-v0", "LargerSokoban-v0", "SokobanDifferentGridVocab-v0"]

# two boxes, the player at the top left; see test_reward_rules_on_hand_built_room
TWO_BOX_ROOM = """\
########
#PXO___#
#______#
#_XO___#
########"""


def answer(action: str) -> str:
    return f"<answer>{action}</answer>"


def play(env: SokobanEnv, plan: list[str]) -> tuple[float, list[tuple]]:
    """Step through ``plan``; return the total reward and every step's result."""
    total, results = 0.0, []
    for action in plan:
        result = env.step(answer(action))
        total += result[1]
        results.append(result)
    return total, results


def count_pushes(results: list[tuple], start_obs: str, vocab_boxes: str) -> int:
    """Steps after which some box symbol moved."""
    pushes, prev = 0, start_obs
    for obs, *_ in results:
        if [i for i, ch in enumerate(obs) if ch in vocab_boxes] != [
            i for i, ch in enumerate(prev) if ch in vocab_boxes
        ]:
            pushes += 1
        prev = obs
    return pushes


# ---------------------------------------------------------------- generation + solver
def test_1000_generated_rooms_are_solved_and_replay_to_success() -> None:
    env = SokobanEnv(dim_room=(6, 6), num_boxes=1)
    for seed in range(1000):
        obs, info = env.reset(seed=seed)
        plan = solve(env.game_state)
        assert plan, f"seed {seed}: generated room has no solution (or is already solved)\n{obs}"
        total, results = play(env, plan)
        *_, (last_obs, last_reward, terminated, truncated, last_info) = results
        assert terminated and not truncated and last_info["success"], f"seed {seed}"
        assert all(not r[2] for r in results[:-1]), "terminated before the plan ended"
        # one box: net one push onto a target, and every push off one is undone by one push on
        assert total == pytest.approx(-0.1 * len(plan) + 1.0 + 10.0)
        assert last_reward == pytest.approx(-0.1 + 1.0 + 10.0)
        assert all(r[4]["action_is_valid"] and r[4]["action_is_effective"] for r in results)
        assert "X" not in last_obs and last_obs.count("√") == 1
        pushes = count_pushes(results, obs, "X√")
        assert info["min_pushes"] >= 2 and pushes >= info["min_pushes"]


@pytest.mark.parametrize("seed", range(6))
def test_larger_rooms_with_two_boxes_are_solvable(seed: int) -> None:
    env = SokobanEnv(dim_room=(8, 8), num_boxes=2)
    obs, info = env.reset(seed=seed)
    assert obs.count("X") == 2 and obs.count("O") + obs.count("S") == 2
    plan = solve(env.game_state)
    assert plan is not None
    total, results = play(env, plan)
    assert results[-1][2] and results[-1][4]["success"]
    assert total == pytest.approx(-0.1 * len(plan) + 2.0 + 10.0)
    assert count_pushes(results, obs, "X√") >= info["min_pushes"] >= 3


def test_generate_room_is_deterministic_and_accepts_several_rngs() -> None:
    a = generate_room((8, 8), 2, 30, np.random.default_rng(5))
    b = generate_room((8, 8), 2, 30, np.random.default_rng(5))
    assert a == b and a.state == b.state
    assert generate_room((6, 6), 1, 30, 7).state == generate_room((6, 6), 1, 30, 7).state
    rooms = {render_grid(generate_room((6, 6), 1, 30, s).state) for s in range(20)}
    assert len(rooms) > 15
    room = generate_room((6, 6), 1, 30, 1)
    assert room.exact and room.pushes >= 2 and room.attempts >= 1


@pytest.mark.parametrize(("dim_room", "num_boxes"), [((4, 5), 1), ((5, 4), 1), ((5, 5), 1), ((4, 12), 3), ((7, 9), 5)])
def test_generation_works_for_small_and_odd_shapes(dim_room: tuple[int, int], num_boxes: int) -> None:
    for seed in range(3):
        state = generate_room(dim_room, num_boxes, 30, seed).state
        assert (state.rows, state.cols) == dim_room
        assert len(state.boxes) == num_boxes and not state.boxes & state.targets
        if num_boxes <= 2:
            assert solve(state) is not None


def test_generation_failure_raises_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generator_module, "_carve_floor", lambda rows, cols, n, rand: [rows + 1])
    with pytest.raises(GenerationError, match="could not generate") as err:
        generate_room((6, 6), 1, 30, 0, max_attempts=7)
    assert isinstance(err.value, EnvError) and err.value.attempts == 7


def test_solver_finds_shortest_plan_and_detects_dead_rooms() -> None:
    assert solve("#####\n#PXO#\n#####") == ["Right"]
    assert solve(["######", "#O_XP#", "#____#", "######"]) == ["Left", "Left"]
    plan = solve(["######", "#_OX_#", "#___P#", "######"])
    assert plan == ["Up", "Left"]
    # the box is in a corner that is not a target
    assert solve(["#####", "#X__#", "#__O#", "#P__#", "#####"]) is None
    # the alt vocab, as text
    assert solve("######\n#@$.-#\n######", vocab="alt") == ["Right"]
    assert solve("#####\n#P√_#\n#####") == []  # already solved
    with pytest.raises(SolverLimitError):
        solve(generate_room((8, 8), 2, 30, 0).state, max_states=1)


# ---------------------------------------------------------------- env behaviour
def test_same_seed_same_episode() -> None:
    rng = np.random.default_rng(0)
    actions = [answer(ACTIONS[i]) for i in rng.integers(0, 4, size=60)]
    runs = []
    for _ in range(2):
        env = envhub.make("LargerSokoban-v0", max_steps=None)
        trace = [env.reset(seed=123)]
        for action in actions:
            step = env.step(action)
            trace.append(step)
            if step[2]:
                break
        runs.append(trace)
    assert runs[0] == runs[1]
    first_obs = {SokobanEnv().reset(seed=s)[0] for s in range(10)}
    assert len(first_obs) > 5


def test_reward_rules_on_hand_built_room() -> None:
    env = SokobanEnv()
    obs, _ = env.reset(options={"grid": TWO_BOX_ROOM})
    assert obs == TWO_BOX_ROOM

    def step(action: str, reward: float, effective: bool = True, done: bool = False) -> str:
        obs, r, terminated, truncated, info = env.step(answer(action))
        assert r == pytest.approx(reward), action
        assert info["action_is_effective"] is effective and info["action_is_valid"] is True
        assert terminated is done and info["success"] is done and truncated is False
        return obs

    step("Up", -0.1, effective=False)  # wall
    step("Left", -0.1, effective=False)  # wall
    obs = step("Right", -0.1 + 1.0)  # box onto a target
    assert obs.splitlines()[1] == "#_P√___#"
    obs = step("Right", -0.1 - 1.0)  # and off it again
    assert obs.splitlines()[1] == "#__SX__#"
    for action in ("Down", "Right", "Right", "Up"):  # walk round the box
        step(action, -0.1)
    step("Left", -0.1 + 1.0)  # push it back on
    for action in ("Down", "Left", "Left", "Left", "Down"):
        step(action, -0.1)
    obs = step("Right", -0.1 + 1.0 + 10.0, done=True)  # last box: solved
    assert obs.splitlines()[3] == "#_P√___#" and "X" not in obs


def test_unpushable_boxes_are_valid_but_not_effective() -> None:
    env = SokobanEnv()
    env.reset(options={"grid": "#######\n#PXX_O#\n#____O#\n#######"})
    obs, reward, _, _, info = env.step(answer("Right"))  # box against box
    assert reward == pytest.approx(-0.1) and info["action_is_valid"] and not info["action_is_effective"]
    env.reset(options={"grid": "#####\n#_PX#\n#__O#\n#####"})
    before = env.render()
    obs, reward, _, _, info = env.step(answer("Right"))  # box against a wall
    assert obs == before and not info["action_is_effective"] and reward == pytest.approx(-0.1)


@pytest.mark.parametrize("text", ["<answer>Jump</answer>", "Up", "", "<answer></answer>", "<answer>Up Left</answer>"])
def test_invalid_actions_cost_the_format_penalty(text: str) -> None:
    env = SokobanEnv(format_penalty=-0.5)
    obs, _ = env.reset(seed=0)
    new_obs, reward, terminated, truncated, info = env.step(text)
    assert new_obs == obs and reward == -0.5 and not terminated and not truncated
    assert info["action_is_valid"] is False and info["action_is_effective"] is False


def test_actions_are_case_insensitive_and_read_from_the_last_answer() -> None:
    env = SokobanEnv()
    env.reset(options={"grid": "######\n#_P_O#\n#___X#\n######"})
    for text, expected_row in [
        ("<answer> right </answer>", "#__PO#"),
        ("I think <answer>Up</answer> no wait <ANSWER>LEFT</ANSWER>", "#_P_O#"),
        ("<answer>rIgHt</answer>", "#__PO#"),
    ]:
        obs, _, _, _, info = env.step(text)
        assert info["action_is_valid"] and obs.splitlines()[1] == expected_row
    assert SokobanEnv().action_candidates() == ["Up", "Down", "Left", "Right"]


def test_state_round_trip_mid_episode() -> None:
    rng = np.random.default_rng(1)
    actions = [answer(ACTIONS[i]) for i in rng.integers(0, 4, size=40)]
    env = envhub.make("LargerSokoban-v0", max_steps=1000)
    env.reset(seed=9)
    for action in actions[:15]:
        env.step(action)
    snapshot = json.loads(json.dumps(env.get_state()))  # JSON-serialisable
    clone = envhub.make("LargerSokoban-v0", max_steps=1000)
    clone.set_state(snapshot)
    assert clone.render() == env.render()
    for action in actions[15:]:
        a, b = env.step(action), clone.step(action)
        assert a == b
        if a[2]:
            break
    # the RNG travels too: the next generated room is the same
    assert env.reset()[0] == clone.reset()[0]
    with pytest.raises(StateError):
        clone.set_state({**snapshot, "env": {**snapshot["env"], "data": {"grid": ["###", "#Q#", "###"]}}})


def test_info_is_json_serialisable_and_render_matches_obs() -> None:
    env = SokobanEnv(render_mode="ansi")
    obs, info = env.reset(seed=4)
    json.dumps(info)
    assert env.render() == obs
    obs, _, _, _, info = env.step(answer("Down"))
    json.dumps(info)
    assert env.render() == obs


def test_render_and_parse_round_trip() -> None:
    state = generate_room((8, 8), 2, 30, 3).state
    for name, vocab in VOCABS.items():
        text = render_grid(state, name)
        assert set(text) <= set(vocab.symbols()) | {"\n"}
        assert parse_grid(text, name) == state
    for vocab in VOCABS.values():
        assert len(set(vocab.symbols())) == 7 and all(len(sym) == 1 for sym in vocab.symbols())
    for bad in [
        "####\n#PX#\n####",
        "#####\n#PPX#\n#O__#\n#####",
        "#####\n#P?O#\n#####",
        "###\n##\n###",
        "____\n_PXO\n____",
    ]:
        with pytest.raises(EnvConfigError):
            parse_grid(bad)


def test_step_reward_is_a_pure_function() -> None:
    assert step_reward(MoveResult(False, -1, -1, False, False, False)) == pytest.approx(-0.1)
    assert step_reward(MoveResult(True, 5, 6, True, False, False)) == pytest.approx(0.9)
    assert step_reward(MoveResult(True, 5, 6, False, True, False)) == pytest.approx(-1.1)
    assert step_reward(MoveResult(True, 5, 6, True, False, True)) == pytest.approx(10.9)


# ---------------------------------------------------------------- configuration
@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"dim_room": (3, 6)}, "dim_room"),
        ({"dim_room": (6, 21)}, "dim_room"),
        ({"dim_room": (4, 4)}, "dim_room"),
        ({"dim_room": (6,)}, "dim_room"),
        ({"dim_room": "6x6"}, "dim_room"),
        ({"dim_room": (6.0, 6)}, "dim_room"),
        ({"dim_room": (True, 6)}, "dim_room"),
        ({"num_boxes": 0}, "num_boxes"),
        ({"num_boxes": 1.5}, "num_boxes"),
        ({"num_boxes": True}, "num_boxes"),
        ({"num_boxes": 3}, "num_boxes"),
        ({"search_depth": 0}, "search_depth"),
        ({"search_depth": "30"}, "search_depth"),
        ({"search_depth": 5000}, "search_depth"),
        ({"dim_room": (8, 8), "num_boxes": 3, "search_depth": 2}, "search_depth"),
        ({"grid_vocab": "fancy"}, "grid_vocab"),
        ({"grid_vocab": None}, "grid_vocab"),
        ({"format_penalty": float("nan")}, "format_penalty"),
    ],
)
def test_bad_kwargs_raise_config_errors(kwargs: dict, param: str) -> None:
    with pytest.raises(EnvConfigError) as err:
        SokobanEnv(**kwargs)
    assert err.value.param == param


def test_too_many_boxes_names_the_maximum() -> None:
    assert max_boxes((6, 6)) == 2 and max_boxes((8, 8)) == 6
    with pytest.raises(EnvConfigError, match="the maximum is 2"):
        envhub.make("Sokoban-v0", num_boxes=3)
    with pytest.raises(EnvConfigError, match="already solved"):
        SokobanEnv().reset(options={"grid": "#####\n#P√_#\n#####"})


# ---------------------------------------------------------------- registry
@pytest.mark.parametrize("env_id", SOKOBAN_IDS)
def test_registered_ids_work(env_id: str) -> None:
    env = envhub.make(env_id)
    inner = env.unwrapped
    vocab = VOCABS[inner.grid_vocab]
    obs, info = env.reset(seed=0)
    rows = obs.split("\n")
    assert (len(rows), len(rows[0])) == inner.dim_room and all(len(r) == len(rows[0]) for r in rows)
    assert set(obs) <= set(vocab.symbols()) | {"\n"}
    assert obs.count(vocab.box) == inner.num_boxes
    assert obs.count(vocab.player) + obs.count(vocab.player_on_target) == 1
    prompt = env.system_prompt()
    assert all(sym in prompt for sym in vocab.symbols()) and "Up" in prompt and "<answer>" in prompt
    plan = solve(obs, inner.grid_vocab)
    assert plan is not None
    for action in plan:
        obs, reward, terminated, truncated, info = env.step(answer(action))
    assert terminated and info["success"] and vocab.box not in obs


def test_alt_vocab_draws_other_symbols() -> None:
    default_obs = envhub.make("SimpleSokoban-v0").reset(seed=2)[0]
    alt = envhub.make("SokobanDifferentGridVocab-v0")
    alt_obs = alt.reset(seed=2)[0]
    assert alt_obs != default_obs and "_" not in alt_obs and "$" in alt_obs
    table = str.maketrans("".join(VOCABS["alt"].symbols()), "".join(VOCABS["default"].symbols()))
    assert alt_obs.translate(table) == default_obs  # same room, other symbols
    assert "$  box" in alt.system_prompt() and "X  box" not in alt.system_prompt()


def test_max_steps_truncates() -> None:
    env = envhub.make("Sokoban-v0", max_steps=3)
    env.reset(seed=0)
    results = [env.step("<answer>nope</answer>") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]


def test_difficulty_is_the_shortest_solution_of_the_room_the_episode_started_in() -> None:
    env = SokobanEnv()
    assert env.difficulty() is None  # no room yet
    env.reset(options={"grid": "#######\n#PX_O_#\n#_____#\n#######"})
    assert env.difficulty() == 2  # Right, Right
    env.step(answer("Down"))  # moving does not change the room's difficulty
    assert env.difficulty() == 2
    env.reset(options={"grid": "#####\n#_PX#\n#__O#\n#####"})  # the box is stuck in a corner
    assert env.difficulty() is None
    env.reset(seed=3)
    assert env.difficulty() == len(solve(env.game_state))
