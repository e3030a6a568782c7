"""WebShop, ALFWorld and SWE played through SandboxManager sessions, exactly as in-process.

The expert plays each episode in-process; its actions are replayed in a sandbox session on the
same seed, which must see the same observations and rewards (SWE: the same rewards and outcome,
since command output may differ in paths and timings).
"""

from __future__ import annotations

from typing import Any

import pytest

import rockroll.envhub as envhub
from rockroll.envs.experts import expert_for
from rockroll.sandbox.base import SandboxSpec

CASES = [("WebShop-v0", {}, 2), ("ALFWorld-v0", {}, 2), ("SWE-v0", {"backend": "local"}, 1)]


def _expert_episode(env_id: str, kwargs: dict, seed: int) -> tuple[list[str], list[tuple]]:
    env = envhub.make(env_id, **kwargs)
    obs, _ = env.reset(seed=seed)
    policy = expert_for(env)
    actions, seen = [], [(obs,)]
    while True:
        action = f"<answer>{policy()}</answer>"
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        seen.append((obs, reward, terminated, truncated, info["success"]))
        if terminated or truncated:
            env.close()
            return actions, seen


def _replay(session: Any, seed: int, actions: list[str]) -> list[tuple]:
    obs, _ = session.reset(seed=seed)
    seen = [(obs,)]
    for action in actions:
        obs, reward, terminated, truncated, info = session.step(action)
        seen.append((obs, reward, terminated, truncated, info["success"]))
    return seen


def _check(manager: Any, env_id: str, kwargs: dict, episodes: int) -> None:
    remote_kwargs = {k: v for k, v in kwargs.items() if k != "backend"}  # SWE picks its own inside
    session = manager.open_session(env_id, **remote_kwargs)
    try:
        for seed in range(episodes):
            actions, local = _expert_episode(env_id, kwargs, seed)
            remote = _replay(session, seed, actions)
            assert local[-1][1:] == remote[-1][1:] and local[-1][-1] is True, "the expert's win replays remotely"
            if env_id == "SWE-v0":
                assert [s[1:] for s in remote[1:]] == [s[1:] for s in local[1:]]
            else:
                assert remote == local
    finally:
        session.close()


@pytest.mark.parametrize(("env_id", "kwargs", "episodes"), CASES)
def test_hard_envs_play_through_process_sandboxes(make_manager: Any, env_id: str, kwargs: dict, episodes: int) -> None:
    _check(make_manager(backend="process"), env_id, kwargs, episodes)


@pytest.mark.docker
@pytest.mark.parametrize(("env_id", "kwargs", "episodes"), CASES)
def test_hard_envs_play_through_docker_sandboxes(
    make_manager: Any, docker_image: str, env_id: str, kwargs: dict, episodes: int
) -> None:
    manager = make_manager(backend="docker", default_spec=SandboxSpec(image=docker_image))
    _check(manager, env_id, kwargs, episodes)
