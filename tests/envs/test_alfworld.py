"""ALFWorld-v0: generated households, ALFWorld's grammar and wording, goals, planner, fork."""

from __future__ import annotations

import collections
import json
import types

import numpy as np
import pytest

import rockroll.envhub as envhub
from rockroll.envs.alfworld import TASK_TYPES, ALFWorldEnv, World, goal_satisfied, next_command, plan
from rockroll.envs.alfworld import original as original_mod
from rockroll.envs.alfworld.commands import admissible, execute, normalize
from rockroll.envs.alfworld.world import Item, Receptacle, Task
from rockroll.envs.errors import EnvConfigError, StateError


def _answer(cmd: str) -> str:
    return f"<answer>{cmd}</answer>"


def _solve(env, seed: int) -> tuple[str, list[str]]:
    """Reset ``env`` (made by envhub) to ``seed`` and play the planner's commands; return (task type, plan)."""
    env.reset(seed=seed)
    commands = plan(env)
    assert len(commands) < envhub.spec("ALFWorld-v0").max_steps
    for i, cmd in enumerate(commands):
        obs, reward, terminated, truncated, info = env.step(_answer(cmd))
        assert info["action_is_valid"], (seed, cmd)
        last = i == len(commands) - 1
        assert terminated is last and info["success"] is last and reward == (1.0 if last else 0.0), (seed, cmd)
        assert not truncated
    return info["task_type"], commands


# ------------------------------------------------------------------ planner
def test_planner_solves_500_generated_tasks_of_all_six_types() -> None:
    env = envhub.make("ALFWorld-v0")
    counts = collections.Counter(_solve(env, seed)[0] for seed in range(500))
    assert sum(counts.values()) == 500
    assert set(counts) == set(TASK_TYPES), counts
    assert min(counts.values()) >= 40, counts  # roughly uniform over the six


@pytest.mark.parametrize(
    "kwargs",
    [{"num_rooms": 4}, {"num_receptacles": 5, "num_distractors": 0}, {"num_receptacles": 40, "num_distractors": 60}],
)
def test_planner_solves_tasks_under_every_difficulty_knob(kwargs: dict) -> None:
    env = envhub.make("ALFWorld-v0", **kwargs)
    for seed in range(60):
        _solve(env, seed)


def test_planner_first_puts_down_an_object_the_task_does_not_need() -> None:
    world = _tiny_world("pick_heat_then_place_in_recep")
    _run(world, "go to shelf 1; take apple 1 from shelf 1")
    commands = plan(world)  # raises if it gets stuck
    assert commands[0] == "put apple 1 in/on shelf 1" and "heat mug 2 with microwave 1" in commands  # the mug at hand


# -------------------------------------------------------------- determinism
def test_same_seed_same_household_and_different_seeds_differ() -> None:
    a, b = ALFWorldEnv(), ALFWorldEnv()
    obs_a, info_a = a.reset(seed=123)
    np.random.seed(0)  # numpy's global RNG plays no part
    obs_b, info_b = b.reset(seed=123)
    assert obs_a == obs_b and info_a == info_b and a.get_state() == b.get_state()
    intros = {ALFWorldEnv().reset(seed=s)[0] for s in range(30)}
    assert len(intros) == 30


def test_episodes_replay_identically_and_reset_without_seed_continues_the_stream() -> None:
    def run() -> list:
        env = envhub.make("ALFWorld-v0")
        env.reset(seed=9)
        out = [env.step(_answer(c))[0] for c in plan(env)]
        out.append(env.reset()[0])
        return out

    assert run() == run()


# ------------------------------------------------------------- state / fork
def test_state_round_trip_mid_episode_forks_identically() -> None:
    env = envhub.make("ALFWorld-v0", task_types=["pick_two"])
    env.reset(seed=21)
    commands = plan(env)
    for cmd in commands[:3]:
        env.step(_answer(cmd))
    snapshot = json.loads(json.dumps(env.get_state()))
    fork = envhub.make("ALFWorld-v0", task_types=["pick_two"])
    fork.set_state(snapshot)
    assert fork.render() == env.render()
    assert fork.action_candidates() == env.action_candidates()
    rest = commands[3:] + ["look"]  # one extra: the episode ends first
    forked = [fork.step(_answer(c)) for c in rest[:-1]]
    assert json.loads(json.dumps(env.get_state())) == snapshot  # the original did not move
    assert [env.step(_answer(c)) for c in rest[:-1]] == forked
    assert forked[-1][2] and forked[-1][4]["success"]


def test_bad_snapshots_raise_state_error() -> None:
    env = ALFWorldEnv()
    env.reset(seed=0)
    state = env.get_state()
    broken = json.loads(json.dumps(state))
    broken["data"]["world"]["holding"] = "unicorn 1"
    with pytest.raises(StateError):
        env.set_state(broken)
    del broken["data"]["world"]
    with pytest.raises(StateError):
        env.set_state(broken)
    assert env.get_state() == state  # a failed restore leaves the env as it was


# --------------------------------------------------------- commands / text
def test_inadmissible_command_says_nothing_happens_and_changes_nothing() -> None:
    env = envhub.make("ALFWorld-v0", format_penalty=-0.5)
    env.reset(seed=2)
    before = env.get_state()["env"]
    commands = env.action_candidates()
    for answer in (_answer("fly to the moon"), _answer("take mug 99 from cabinet 1"), "no tags", _answer("")):
        obs, reward, terminated, truncated, info = env.step(answer)
        assert obs == "Nothing happens."
        assert reward == -0.5 and not terminated and not truncated
        assert info["action_is_valid"] is False and info["action_is_effective"] is False
        assert info["admissible_commands"] == commands
    assert env.get_state()["env"] == before


def test_admissible_commands_are_sorted_json_and_match_action_candidates() -> None:
    env = envhub.make("ALFWorld-v0")
    _, info = env.reset(seed=5)
    for cmd in plan(env)[:-1]:
        adm = info["admissible_commands"]
        assert adm == sorted(set(adm)) == env.action_candidates()
        assert cmd in adm and {"look", "inventory"} <= set(adm)
        json.dumps(info)
        _, _, _, _, info = env.step(_answer(cmd))


def test_feedback_reads_like_alfworld() -> None:
    env = ALFWorldEnv(task_types=["cool"])
    obs, _ = env.reset(seed=1)
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly")
    assert obs.endswith(f"\n\nYour task is to: {env.world.task.text}")
    fridge = env.world.of_kind("fridge")[0]
    obs = env.step(_answer(f"go to {fridge.name}"))[0]
    assert obs == f"You arrive at {fridge.name}. The {fridge.name} is closed."
    obs = env.step(_answer(f"open {fridge.name}"))[0]
    assert obs.startswith(f"You open the {fridge.name}. The {fridge.name} is open. In it, you see ")
    assert env.step(_answer(f"close {fridge.name}"))[0] == f"You close the {fridge.name}."
    assert env.step(_answer("inventory"))[0] == "You are not carrying anything."
    assert env.step(_answer("look"))[0] == f"You are facing the {fridge.name}. Next to it, you see nothing."
    top = env.world.of_kind("countertop")[0]
    obs = env.step(_answer(f"Go to {top.name}."))[0]  # case and final period are forgiven
    things = [f"a {n}" for n in top.contents]
    listed = (
        "nothing" if not things else things[0] if len(things) == 1 else ", ".join(things[:-1]) + ", and " + things[-1]
    )
    assert obs == f"You arrive at {top.name}. On the {top.name}, you see {listed}."


def test_put_variants_and_appliance_commands() -> None:
    assert normalize("  Put  Mug 1 in CoffeeMachine 1. ") == "put mug 1 in/on coffeemachine 1"
    assert normalize("move mug 1 to desk 2") == "put mug 1 in/on desk 2"
    assert normalize("put mug 1 on desk 2") == "put mug 1 in/on desk 2"
    world = _tiny_world("pick_heat_then_place_in_recep", obj="mug", recep="coffeemachine")
    for cmd, feedback in [
        ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a mug 1."),
        ("take mug 1 from countertop 1", "You pick up the mug 1 from the countertop 1."),
        ("examine mug 1", "There's nothing special about mug 1."),
        ("inventory", "You are carrying: a mug 1."),
        ("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed."),
        ("heat mug 1 with microwave 1", "You heat the mug 1 using the microwave 1."),
        ("examine mug 1", "This is a hot mug 1."),
        ("go to coffeemachine 1", "You arrive at coffeemachine 1. On the coffeemachine 1, you see nothing."),
        ("put mug 1 in/on coffeemachine 1", "You put the mug 1 in/on the coffeemachine 1."),
    ]:
        assert cmd in admissible(world), cmd
        assert execute(world, cmd)[0] == feedback
    assert goal_satisfied(world)


# ----------------------------------------------------------------- goals
def _tiny_world(
    task_type: str, obj: str = "mug", recep: str | None = "coffeemachine", light: str | None = None
) -> World:
    """A kitchen with mug 1 on countertop 1, mug 2 and apple 1 on shelf 1, a desklamp 1 on desk 1."""
    recs = [
        Receptacle("countertop 1", "countertop", 0, contents=["mug 1"]),
        Receptacle("coffeemachine 1", "coffeemachine", 0),
        Receptacle("coffeemachine 2", "coffeemachine", 0),
        Receptacle("sinkbasin 1", "sinkbasin", 0),
        Receptacle("microwave 1", "microwave", 0, True, False),
        Receptacle("fridge 1", "fridge", 0, True, False),
        Receptacle("desk 1", "desk", 0, contents=["desklamp 1"]),
        Receptacle("shelf 1", "shelf", 0, contents=["mug 2", "apple 1"]),
    ]
    items = [
        Item("mug 1", "mug", "countertop 1"),
        Item("mug 2", "mug", "shelf 1"),
        Item("apple 1", "apple", "shelf 1"),
        Item("desklamp 1", "desklamp", "desk 1", portable=False),
    ]
    task = Task(task_type, obj, recep, light, "test task.")
    return World(["kitchen"], {r.name: r for r in recs}, {o.name: o for o in items}, task)


def _run(world: World, cmds: str) -> bool:
    """Play ``;``-separated admissible commands; return whether the goal then holds."""
    for cmd in cmds.split("; "):
        assert cmd in admissible(world), (cmd, admissible(world))
        execute(world, cmd)
    return goal_satisfied(world)


def test_goal_pick_and_place() -> None:
    w = _tiny_world("pick_and_place_simple")
    assert not _run(w, "go to countertop 1; take mug 1 from countertop 1; go to coffeemachine 2")
    assert _run(w, "put mug 1 in/on coffeemachine 2")


@pytest.mark.parametrize(
    ("task_type", "appliance", "verb"),
    [
        ("pick_clean_then_place_in_recep", "sinkbasin 1", "clean"),
        ("pick_heat_then_place_in_recep", "microwave 1", "heat"),
        ("pick_cool_then_place_in_recep", "fridge 1", "cool"),
    ],
)
def test_goal_clean_heat_cool_need_the_state(task_type: str, appliance: str, verb: str) -> None:
    w = _tiny_world(task_type)
    put = "go to coffeemachine 1; put mug 1 in/on coffeemachine 1"
    assert not _run(w, f"go to countertop 1; take mug 1 from countertop 1; {put}")  # placed, not clean/hot/cool
    assert not _run(w, f"take mug 1 from coffeemachine 1; go to {appliance}; {verb} mug 1 with {appliance}")
    assert _run(w, put)
    if verb in ("heat", "cool"):  # heating undoes cooling and back
        undo, where = {"heat": ("cool", "fridge 1"), "cool": ("heat", "microwave 1")}[verb]
        assert not _run(w, f"take mug 1 from coffeemachine 1; go to {where}; {undo} mug 1 with {where}; {put}")


def test_goal_pick_two_needs_both_in_one_receptacle() -> None:
    w = _tiny_world("pick_two_obj_and_place")
    first = "go to countertop 1; take mug 1 from countertop 1; go to coffeemachine 1; put mug 1 in/on coffeemachine 1"
    assert not _run(w, f"{first}; go to shelf 1; take mug 2 from shelf 1; go to coffeemachine 2")
    assert not _run(w, "put mug 2 in/on coffeemachine 2")  # one in each coffeemachine
    assert _run(w, "take mug 2 from coffeemachine 2; go to coffeemachine 1; put mug 2 in/on coffeemachine 1")


def test_goal_look_at_object_in_light() -> None:
    w = _tiny_world("look_at_obj_in_light", recep=None, light="desklamp")
    assert not _run(w, "go to desk 1; use desklamp 1")  # light on, empty hands
    assert not _run(w, "use desklamp 1; go to countertop 1; take mug 1 from countertop 1; go to desk 1")
    assert _run(w, "use desklamp 1")
    assert next_command(w) is None


# ------------------------------------------------------------ configuration
def test_task_type_filter_by_name_and_short_name() -> None:
    for given, expected in [
        (["pick_heat_then_place_in_recep"], {"pick_heat_then_place_in_recep"}),
        (("look", "pick_two"), {"look_at_obj_in_light", "pick_two_obj_and_place"}),
    ]:
        env = envhub.make("ALFWorld-v0", task_types=given)
        seen = {env.reset(seed=s)[1]["task_type"] for s in range(40)}
        assert seen == expected


def test_category_is_the_short_task_type() -> None:
    env = envhub.make("ALFWorld-v0")
    assert env.unwrapped.category() is None
    shorts = ALFWorldEnv.known_task_types()
    seen = set()
    for s in range(60):
        _, info = env.reset(seed=s)
        seen.add(env.unwrapped.category())
        assert shorts[env.unwrapped.category()] == info["task_type"]
    assert seen == {"pick", "look", "clean", "heat", "cool", "pick_two"}


def test_more_rooms_receptacles_and_distractors_make_bigger_homes() -> None:
    small, big = ALFWorldEnv(num_receptacles=5, num_distractors=0), ALFWorldEnv(num_rooms=3, num_distractors=30)
    small.reset(seed=0)
    big.reset(seed=0)
    assert len(big.world.rooms) == 3 and len(set(big.world.rooms)) == 3
    assert len(big.world.receptacles) > len(small.world.receptacles)
    assert len(big.world.items) > 60 > len(small.world.items)
    assert "You are in the middle of a house." in big.render()


_BAD_KWARGS = {
    "task_types": [[], ["fly"], "pick", [3]],
    "num_rooms": [0, 5, True, "2"],
    "num_receptacles": [2, 41, 3.5],
    "num_distractors": [-1, 61],
    "format_penalty": [float("nan"), "x"],
    "size": [3],  # unknown kwarg
}


@pytest.mark.parametrize(("param", "value"), [(p, v) for p, vs in _BAD_KWARGS.items() for v in vs])
def test_bad_kwargs_raise_env_config_error(param: str, value: object) -> None:
    with pytest.raises(EnvConfigError) as e:
        envhub.make("ALFWorld-v0", **{param: value})
    assert e.value.param == param


def test_registered_with_tags_and_step_limit() -> None:
    spec = envhub.spec("ALFWorld-v0")
    assert spec.max_steps == 50 and {"text-game", "household"} <= set(spec.tags)
    env = envhub.make("ALFWorld-v0")
    env.reset(seed=0)
    for _ in range(49):
        assert not env.step(_answer("look"))[3]
    assert env.step(_answer("look"))[3]  # truncated by MaxSteps at 50


# ------------------------------------------------------- original adapter
@pytest.mark.skipif(not original_mod.alfworld_available(), reason="the alfworld package is not installed")
def test_original_alfworld_adapter_plays_a_game() -> None:  # pragma: no cover - needs alfworld + data
    try:
        env = original_mod.ALFWorldOriginalEnv(split="valid_seen")
    except EnvConfigError as e:
        pytest.skip(f"alfworld data missing: {e}")
    obs, info = env.reset(seed=0)
    assert "Your task is to:" in obs and info["admissible_commands"]
    obs, *_, info = env.step(_answer("fly to the moon"))
    assert obs == "Nothing happens." and not info["action_is_valid"]
    state = json.loads(json.dumps(env.get_state()))
    cmd = info["admissible_commands"][0]
    a = env.step(_answer(cmd))
    env.set_state(state)
    assert env.step(_answer(cmd)) == a


def test_original_adapter_contract_with_a_stub_backend(tmp_path, monkeypatch) -> None:
    """The adapter's own logic (game choice, parsing, replay fork) against a stand-in TextWorld."""
    for task in ("pick_and_place_simple-Mug-None-Desk-1", "look_at_obj_in_light-Pen-None-DeskLamp-2"):
        (tmp_path / "json_2.1.1" / "valid_seen" / task / "trial_1").mkdir(parents=True)
        (tmp_path / "json_2.1.1" / "valid_seen" / task / "trial_1" / "game.tw-pddl").write_text("{}")
    game = tmp_path / "json_2.1.1" / "valid_seen" / "pick_and_place_simple-Mug-None-Desk-1" / "trial_1"

    class State(dict):
        __getattr__ = dict.__getitem__

    class StubGame:
        def __init__(self) -> None:
            self.n = 0

        def _state(self, text: str) -> State:
            return State(feedback=text, admissible_commands=["move mug 1 to desk 1", "look"], won=self.n >= 2)

        def reset(self) -> State:
            self.n = 0
            return self._state("-= Welcome to TextWorld, ALFRED! =-\n\nYour task is to: put a mug in desk.")

        def step(self, cmd: str) -> tuple[State, int, bool]:
            self.n += 1
            return self._state(f"step {self.n}: {cmd}"), 0, self.n >= 2

        def close(self) -> None:
            pass

    stub = types.SimpleNamespace(start=lambda path, infos, wrappers: StubGame(), EnvInfos=lambda **kw: kw)
    monkeypatch.setattr(original_mod, "_load_backend", lambda: (stub, []))
    env = original_mod.ALFWorldOriginalEnv(data_path=str(tmp_path), split="valid_seen", task_types=["pick"])
    assert env.game_files == [str(game / "game.tw-pddl")]
    obs, info = env.reset(seed=0)
    assert "Your task is to" in obs and info["gamefile"].endswith("game.tw-pddl")
    assert env.step(_answer("jump"))[0] == "Nothing happens."
    assert env.step(_answer("put mug 1 in desk 1"))[0] == "step 1: move mug 1 to desk 1"  # put -> move
    snap = json.loads(json.dumps(env.get_state()))
    fork = original_mod.ALFWorldOriginalEnv(data_path=str(tmp_path), split="valid_seen", task_types=["pick"])
    fork.set_state(snap)
    assert fork.render() == env.render()
    assert fork.step(_answer("look")) == env.step(_answer("look"))
    with pytest.raises(EnvConfigError) as e:
        original_mod.ALFWorldOriginalEnv(data_path=str(tmp_path / "nowhere"))
    assert e.value.param == "data_path"
    with pytest.raises(EnvConfigError):
        original_mod.ALFWorldOriginalEnv(split="test")


def test_planner_recovers_from_random_mid_episode_states() -> None:
    rng = np.random.default_rng(0)
    env = envhub.make("ALFWorld-v0", num_rooms=2)
    for seed in range(100):
        _, info = env.reset(seed=seed)
        terminated = False
        for _ in range(int(rng.integers(0, 25))):
            cmds = info["admissible_commands"]
            _, _, terminated, _, info = env.step(_answer(cmds[int(rng.integers(len(cmds)))]))
            env.unwrapped.world.validate()
            if terminated:
                break
        if terminated:
            continue
        for cmd in plan(env):
            _, _, terminated, _, info = env.step(_answer(cmd))
            assert info["action_is_valid"]
        assert terminated and info["success"]
