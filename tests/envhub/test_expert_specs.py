"""Experts live on the EnvSpec: a registered env's expert is found through the env ``make`` built."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import rockroll.envhub as envhub
from rockroll.envhub.errors import RegistrationError
from rockroll.envs.experts import expert_factory, expert_for, has_expert
from rockroll.envs.frozenlake import FrozenLakeEnv
from rockroll.envs.play import play_episode


def always_right(env: Any) -> Callable[[], str]:
    """A test expert factory: FrozenLake's 'Right', whatever the state."""
    return lambda: "Right"


@pytest.fixture
def registered():
    ids: list[str] = []

    def add(env_id: str, **kw: Any) -> str:
        envhub.register(env_id, "rockroll.envs.frozenlake:FrozenLakeEnv", max_steps=5, **kw)
        ids.append(env_id)
        return env_id

    yield add
    for env_id in ids:
        envhub.deregister(env_id)


BUILTIN = ["FrozenLake-v0", "Sokoban-v0", "SimpleSokoban-v0", "LargerSokoban-v0", "SokobanDifferentGridVocab-v0",
           "ALFWorld-v0", "WebShop-v0", "SWE-v0", "Lookup-v0", "WebShopTools-v0", "SWETools-v0"]  # fmt: skip


def test_every_builtin_env_names_an_expert() -> None:
    for spec in map(envhub.spec, BUILTIN):
        assert isinstance(spec.expert, str), spec.id
        assert callable(spec.load_expert()), spec.id


def test_registered_expert_is_used_by_name(registered) -> None:
    env = envhub.make(registered("RightOnly-v0", expert="tests.envhub.test_expert_specs:always_right"))
    assert has_expert(env) and has_expert(env.unwrapped)
    env.reset(seed=0)
    assert expert_for(env)() == "Right"
    assert play_episode(env, "expert", 0).steps >= 1
    # a callable works too, like a callable entry point
    env2 = envhub.make(registered("RightOnly-v1", expert=always_right))
    assert expert_factory(env2) is always_right


def test_env_without_expert_says_how_to_add_one(registered) -> None:
    env = envhub.make(registered("NoExpert-v0"))
    assert not has_expert(env)
    with pytest.raises(LookupError, match="no expert policy for NoExpert-v0.*expert='module:factory'"):
        expert_for(env)
    with pytest.raises(LookupError, match="not built by rockroll.envhub.make"):
        expert_for(FrozenLakeEnv())  # built by hand: no spec, so no expert


def test_bad_expert_references_are_clear(registered) -> None:
    with pytest.raises(RegistrationError, match="expert must be 'module:factory'"):
        envhub.register("BadExpert-v0", "rockroll.envs.frozenlake:FrozenLakeEnv", expert="no colon")
    env = envhub.make(registered("Typo-v0", expert="rockroll.envs.frozenlake.expert:expret"))
    assert has_expert(env)  # lazy: nothing imported until asked
    with pytest.raises(
        RegistrationError, match=r"has no 'expret'; did you mean rockroll.envs.frozenlake.expert:expert"
    ):
        expert_for(env)
