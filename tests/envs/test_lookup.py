"""Lookup-v0, the tool env: conformance on every difficulty, the expert, determinism, bad calls, raising tools."""

from __future__ import annotations

import json

import pytest

import rockroll.envhub as envhub
from rockroll.envs import EnvConfigError, check_env
from rockroll.envs.experts import expert_for
from rockroll.envs.lookup import LookupEnv
from rockroll.envs.tools import MAX_CALLS_PER_TURN, ToolAction, ToolCall

HELDOUT = 1_000_000  # rollout.eval_seed_offset's default: held-out seeds start here, training seeds lie below


def _turn(*calls: tuple[str, dict]) -> ToolAction:
    return ToolAction("", tuple(ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)))


def _play_expert(env, seed: int) -> tuple[bool, int]:
    env.reset(seed=seed)
    expert = expert_for(env)
    for turn in range(1, 20):
        _obs, _reward, terminated, truncated, info = env.step(expert())
        if terminated or truncated:
            return bool(info["success"]), turn
    raise AssertionError("the expert never answered")


@pytest.mark.parametrize("difficulty", [0, 1, 2, 3])
def test_check_env_passes_on_every_difficulty(difficulty: int) -> None:
    check_env(
        envhub.make("Lookup-v0", difficulty=difficulty), make=lambda: envhub.make("Lookup-v0", difficulty=difficulty)
    )


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_expert_solves_heldout_seeds_in_difficulty_plus_two_turns(difficulty: int) -> None:
    env = envhub.make("Lookup-v0", difficulty=difficulty)
    played = [_play_expert(env, HELDOUT + s) for s in range(30)]
    assert all(ok for ok, _ in played)
    assert {turns for _, turns in played} == {difficulty + 2}  # find, one get per link, answer
    assert env.unwrapped.difficulty() == difficulty


def test_mixed_difficulty_draws_every_level_from_the_seed() -> None:
    env = LookupEnv()
    levels = {env.reset(seed=s)[1]["hops"] for s in range(30)}
    assert levels == {1, 2, 3}


def test_same_seed_same_episode() -> None:
    a, b = LookupEnv(difficulty=3), LookupEnv(difficulty=3)
    assert a.reset(seed=7) == b.reset(seed=7)
    assert a.get_state() == b.get_state()
    turn = _turn(("find", {"name": a.world.name}))
    assert a.step(turn) == b.step(turn)
    worlds = set()
    for seed in range(5):
        a.reset(seed=seed)
        worlds.add(json.dumps(a.world.to_dict(), sort_keys=True))
    assert len(worlds) == 5


def test_bad_calls_are_mistakes_and_the_episode_goes_on() -> None:
    env = envhub.make("Lookup-v0", difficulty=2, format_penalty=-0.25)
    env.reset(seed=3)
    bad_turns = [
        (_turn(("search", {"q": "Ann"})), "unknown_tools", "unknown tool 'search'"),
        (_turn(("get", {"id": 3})), "bad_arguments", "fail its schema"),
        (_turn(("find", {})), "bad_arguments", "'name' is a required property"),
    ]
    for turn, count, said in bad_turns:
        obs, reward, terminated, truncated, info = env.step(turn)
        assert reward == -0.25 and not terminated and not truncated
        assert info["action_is_valid"] is False and info[count] == 1
        assert info["tool_results"][0]["error"] is True and said in info["tool_results"][0]["content"]
        assert said in obs
    too_many = _turn(*[("get", {"id": "p1"})] * (MAX_CALLS_PER_TURN + 1))
    _obs, reward, terminated, _truncated, info = env.step(too_many)
    assert reward == -0.25 and not terminated and info["action_is_valid"] is False
    assert info["tool_results"][-1]["error"] is True and "at most" in info["tool_results"][-1]["content"]
    expert = expert_for(env)  # the episode goes on, and can still be won
    while True:
        _obs, reward, terminated, _truncated, info = env.step(expert())
        if terminated:
            break
    assert info["success"] is True and reward == 1.0


def test_a_lookup_miss_is_a_plain_result() -> None:
    env = LookupEnv(difficulty=1)
    env.reset(seed=0)
    obs, reward, _t, _tr, info = env.step(_turn(("get", {"id": "p99"}), ("find", {"name": "Nobody"})))
    assert reward == 0.0 and info["action_is_valid"] is True
    assert [r["error"] for r in info["tool_results"]] == [False, False]
    assert 'no record with id "p99"' in obs and 'no record named "Nobody"' in obs


def test_a_tool_that_raises_gives_an_error_result() -> None:
    class Broken(LookupEnv):
        def _call(self, name, arguments):
            if name == "get":
                raise KeyError("the database is down")
            return super()._call(name, arguments)

    env = Broken(difficulty=1)
    env.reset(seed=0)
    obs, reward, terminated, _truncated, info = env.step(_turn(("get", {"id": "p1"}), ("find", {"name": "Ann"})))
    assert not terminated and reward == 0.0
    assert info["tool_errors"] == 1 and info["action_is_valid"] is True  # the env's error, not the agent's
    first, second = info["tool_results"]
    assert first["error"] is True and "KeyError" in first["content"] and "database is down" in first["content"]
    assert second["error"] is False
    json.dumps(info)


def test_text_turn_is_the_final_answer() -> None:
    env = LookupEnv(difficulty=1)
    env.reset(seed=4)
    right = env.world.answer()
    for text, won in [(f"It is {right}. <answer>{right}</answer>", True), (f" {right}.", True), ("no idea", False)]:
        env.reset(seed=4)
        obs, reward, terminated, _tr, info = env.step(text)
        assert terminated and info["success"] is won and reward == (1.0 if won else 0.0)
        assert info["tool_calls"] == 0 and ("right" in obs) is won


def test_calls_after_the_answer_do_not_run() -> None:
    env = LookupEnv(difficulty=1)
    env.reset(seed=2)
    _obs, reward, terminated, _tr, info = env.step(_turn(("answer", {"value": 5}), ("get", {"id": "p1"})))
    assert terminated and reward == 0.0 and info["answer"] == "5"
    assert "not run" in info["tool_results"][1]["content"]


def test_state_round_trip_after_tool_turns() -> None:
    env = envhub.make("Lookup-v0", difficulty=3)
    env.reset(seed=HELDOUT)
    expert = expert_for(env)
    env.step(expert())
    env.step(expert())
    snapshot = json.loads(json.dumps(env.get_state()))
    fork = envhub.make("Lookup-v0", difficulty=3)
    fork.set_state(snapshot)
    fork_expert = expert_for(fork)
    assert fork.render() == env.render() and fork_expert() == expert()
    while not fork.step(fork_expert())[2]:
        pass
    assert env.get_state() == snapshot
    assert fork.unwrapped.final == env.unwrapped.world.answer()


def test_tools_and_prompt() -> None:
    env = envhub.make("Lookup-v0")
    assert [t.name for t in env.tools] == ["find", "get", "answer"]
    assert all(t.to_openai()["type"] == "function" for t in env.tools)
    assert "find(name)" in env.system_prompt()
    assert "tools" in envhub.spec("Lookup-v0").tags


@pytest.mark.parametrize("bad", [4, -1, True, "2", 1.0])
def test_difficulty_is_checked(bad) -> None:
    with pytest.raises(EnvConfigError, match="difficulty"):
        LookupEnv(difficulty=bad)
