"""Every registered env honours the text-env contract: determinism, info keys, state round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rockroll.envhub as envhub
from rockroll.envs.errors import ActionTypeError, EnvError, ResetNeeded

ENV_IDS = [s.id for s in envhub.list_envs() if "slow" not in s.tags]
STEPS = 12
REQUIRED_INFO = {"action_is_valid", "action_is_effective", "success"}


def _action(env, rng: np.random.Generator, i: int) -> str:
    """Step ``i`` of a seeded mix of legal answers (from action_candidates) and junk."""
    candidates = env.action_candidates()
    if i % 5 == 4 or not candidates:
        return "no answer tags here"
    return f"thinking... <answer>{candidates[int(rng.integers(len(candidates)))]}</answer>"


def _play(env, rng: np.random.Generator, n: int, start: int = 0) -> list[tuple]:
    """Play up to ``n`` steps (stopping at the episode's end); return what was seen."""
    log = []
    for i in range(start, start + n):
        action = _action(env, rng, i)
        obs, reward, terminated, truncated, info = env.step(action)
        log.append((action, obs, reward, terminated, truncated, json.dumps(info, sort_keys=True)))
        if terminated or truncated:
            break
    return log


def _rollout(env, seed: int, n: int = STEPS) -> list[tuple]:
    """Play ``n`` seeded steps (resetting on episode end); the actions depend only on ``seed``."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    trace: list[tuple] = [(obs, json.dumps(info, sort_keys=True))]
    for i in range(n):
        action = _action(env, rng, i)
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((action, obs, reward, terminated, truncated, json.dumps(info, sort_keys=True)))
        if terminated or truncated:
            obs, info = env.reset()
            trace.append((obs, json.dumps(info, sort_keys=True)))
    return trace


@pytest.fixture(params=ENV_IDS)
def env_id(request) -> str:
    return request.param


def test_reset_and_step_follow_the_contract(env_id: str) -> None:
    env = envhub.make(env_id)
    assert env.system_prompt().strip(), "the env must give the agent its instructions"
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and env.observation_space.contains(obs)
    assert REQUIRED_INFO <= set(info)
    json.dumps(info)
    rng = np.random.default_rng(0)
    for i in range(6):
        obs, reward, terminated, truncated, info = env.step(_action(env, rng, i))
        assert isinstance(obs, str)
        assert isinstance(reward, float)
        assert isinstance(terminated, bool) and isinstance(truncated, bool)
        assert REQUIRED_INFO <= set(info), f"missing {REQUIRED_INFO - set(info)}"
        json.dumps(info)
        if terminated or truncated:
            env.reset()
    env.close()


def test_unparsable_answer_is_a_penalised_noop(env_id: str) -> None:
    env = envhub.make(env_id, format_penalty=-0.25)
    before, _ = env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step("I refuse to use the answer tags")
    assert reward == -0.25
    assert info["action_is_valid"] is False and info["action_is_effective"] is False
    assert not terminated
    assert env.get_state()["env"]["data"] == _fresh_state(env_id, 1), "an invalid action must not change the game"


def _fresh_state(env_id: str, seed: int) -> dict:
    env = envhub.make(env_id)
    env.reset(seed=seed)
    return env.get_state()["env"]["data"]


def test_non_string_actions_and_step_before_reset_raise_typed_errors(env_id: str) -> None:
    env = envhub.make(env_id)
    with pytest.raises(ResetNeeded):
        env.step("<answer>x</answer>")
    env.reset(seed=0)
    for bad in (3, None, b"<answer>Up</answer>", ["Up"]):
        with pytest.raises(ActionTypeError):
            env.step(bad)  # type: ignore[arg-type]


def test_same_seed_same_episode(env_id: str) -> None:
    a = _rollout(envhub.make(env_id), seed=11)
    b = _rollout(envhub.make(env_id), seed=11)
    assert a == b


def test_state_round_trip_forks_an_episode(env_id: str) -> None:
    spec = envhub.spec(env_id)
    env = envhub.make(env_id)
    env.reset(seed=5)
    if _play(env, np.random.default_rng(5), 3)[-1][3:5] != (False, False):
        env.reset(seed=6)
    if not spec.supports_fork:
        with pytest.raises(EnvError):
            env.get_state()
        return
    snapshot = json.loads(json.dumps(env.get_state()))  # must survive JSON
    fork = envhub.make(env_id)
    fork.set_state(snapshot)
    assert fork.render() == env.render()
    forked = _play(fork, np.random.default_rng(9), 8, start=1)
    # the fork played ahead on its own: the original has not moved
    assert json.loads(json.dumps(env.get_state())) == snapshot
    original = _play(env, np.random.default_rng(9), 8, start=1)
    assert forked == original
