"""EnvSpec.parses_answer (how players send actions) and the gymnasium spec's max_episode_steps."""

from __future__ import annotations

import gymnasium as gym
import pytest

import rockroll.envhub as hub


class Plain(gym.Env):
    def __init__(self) -> None:
        self.action_space = gym.spaces.Text(max_length=8)
        self.observation_space = gym.spaces.Text(max_length=8)

    def reset(self, *, seed=None, options=None):
        return "", {}

    def step(self, action):
        return action, 0.0, False, False, {}


@pytest.fixture()
def plain_id():
    hub.register("PlainSpec-v0", Plain, max_steps=4, parses_answer=False)
    yield "PlainSpec-v0"
    hub.deregister("PlainSpec-v0")


def test_builtin_envs_parse_answers() -> None:
    assert all(s.parses_answer for s in hub.list_envs())
    assert hub.spec("FrozenLake-v0").format_action("Up") == "<answer>Up</answer>"
    assert hub.spec("FrozenLake-v0").format_action("<answer>Up</answer>") == "<answer>Up</answer>"


def test_plain_env_gets_bare_actions(plain_id: str) -> None:
    assert hub.spec(plain_id).parses_answer is False
    assert hub.spec(plain_id).format_action("Up") == "Up"


@pytest.mark.parametrize("env_id", ["FrozenLake-v0", "Sokoban-v0", "WebShop-v0", "ALFWorld-v0"])
def test_max_episode_steps_is_the_step_limit(env_id: str) -> None:
    limit = hub.spec(env_id).max_steps
    assert limit is not None
    assert hub.make(env_id).spec.max_episode_steps == limit
    assert hub.make(env_id, max_steps=3).spec.max_episode_steps == 3
    made = gym.make(f"rockroll/{env_id}")
    assert made.spec.max_episode_steps == limit and made.spec.id == f"rockroll/{env_id}"
    assert isinstance(made, hub.make(env_id).__class__)  # no TimeLimit on top: MaxSteps is the limit


def test_max_episode_steps_of_a_user_env(plain_id: str) -> None:
    env = hub.make(plain_id)
    assert env.spec.max_episode_steps == 4
    env.reset()
    ends = [env.step("x")[3] for _ in range(4)]
    assert ends == [False, False, False, True]
    again = gym.make(env.spec)  # a spec remakes its env
    assert again.spec.max_episode_steps == 4
