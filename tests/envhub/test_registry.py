"""The registry: ids, versions, lazy entry points, errors, gymnasium integration."""

from __future__ import annotations

import gymnasium as gym
import pytest

import rockroll.envhub as envhub
from rockroll.envhub import RegistrationError, UnknownEnvError
from rockroll.envs.errors import EnvConfigError


def test_make_builds_a_wrapped_env_with_the_spec_step_limit() -> None:
    env = envhub.make("FrozenLake-v0", size=4, is_slippery=False)
    assert env.max_steps == 20
    assert env.unwrapped.size == 4 and env.unwrapped.is_slippery is False
    assert envhub.make("FrozenLake-v0", max_steps=5).max_steps == 5


def test_unversioned_id_takes_the_newest_version() -> None:
    envhub.register("Toy-v0", "rockroll.envs.frozenlake:FrozenLakeEnv", kwargs={"size": 3})
    envhub.register("Toy-v2", "rockroll.envs.frozenlake:FrozenLakeEnv", kwargs={"size": 5})
    try:
        assert envhub.spec("Toy").id == "Toy-v2"
        assert envhub.make("Toy").unwrapped.size == 5
        assert envhub.make("Toy-v0").unwrapped.size == 3
    finally:
        envhub.deregister("Toy-v0")
        envhub.deregister("Toy-v2")


def test_unknown_id_suggests_close_matches() -> None:
    with pytest.raises(UnknownEnvError) as err:
        envhub.make("Sokobn-v0")
    assert "Sokoban-v0" in err.value.suggestions
    assert "Did you mean" in str(err.value)
    with pytest.raises(LookupError):
        envhub.make("Zzzzzzz-v0")


@pytest.mark.parametrize("bad_id", ["", "1abc-v0", "a b-v0", "Name-vx"])
def test_malformed_ids_are_rejected(bad_id: str) -> None:
    with pytest.raises(RegistrationError):
        envhub.register(bad_id, "rockroll.envs.frozenlake:FrozenLakeEnv")


def test_register_needs_version_and_unique_id_and_good_entry_point() -> None:
    with pytest.raises(RegistrationError, match="version"):
        envhub.register("NoVersion", "rockroll.envs.frozenlake:FrozenLakeEnv")
    with pytest.raises(RegistrationError, match="already registered"):
        envhub.register("FrozenLake-v0", "rockroll.envs.frozenlake:FrozenLakeEnv")
    with pytest.raises(RegistrationError, match="module:Class"):
        envhub.register("Bad-v0", "not an entry point")
    envhub.register("Missing-v0", "rockroll.envs.nothing_here:Env")
    try:
        with pytest.raises(RegistrationError, match="cannot load"):
            envhub.make("Missing-v0")
    finally:
        envhub.deregister("Missing-v0")


def test_entry_points_are_lazy() -> None:
    envhub.register("Lazy-v0", "rockroll.envs.not_yet_written:Env")  # no import at registration
    envhub.deregister("Lazy-v0")


def test_unknown_kwarg_lists_accepted_ones() -> None:
    with pytest.raises(EnvConfigError, match="accepted: size, p, is_slippery"):
        envhub.make("FrozenLake-v0", slippery=True)


def test_gymnasium_make_reaches_every_env() -> None:
    env = gym.make("rockroll/FrozenLake-v0", is_slippery=False)
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and "P" in obs and info["success"] is False
    ids = {s.id for s in envhub.list_envs()}
    assert {f"rockroll/{i}" for i in ids} <= set(gym.registry)


def test_list_envs_filters_by_tag() -> None:
    assert {s.id for s in envhub.list_envs("puzzle")} >= {"Sokoban-v0", "SimpleSokoban-v0"}
    assert all("grid" in s.tags for s in envhub.list_envs("grid"))
