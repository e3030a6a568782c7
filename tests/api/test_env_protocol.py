"""Every env handle satisfies :class:`rockroll.envs.core.TextEnvProtocol`, and plays the same.

The four handles: a ``TextEnv``, the ``MaxSteps`` that ``envhub.make`` returns, a session in a
sandbox (``RemoteSession`` through a real process-backend ``SandboxManager``) and a session over
HTTP (``RemoteEnv`` on a real ``rockroll serve``).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

import rockroll.envhub as hub
from rockroll.api.server.serve_proc import ServerProc
from rockroll.client.remote_env import RemoteEnv
from rockroll.client.sdk import Client
from rockroll.envs import MaxSteps, TextEnv, TextEnvProtocol
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.session import RemoteSession

KWARGS = {"is_slippery": False}


@pytest.fixture()
def manager(tmp_path: Any) -> Iterator[SandboxManager]:
    state = tempfile.mkdtemp(prefix="rr-", dir="/tmp")
    m = SandboxManager(
        backend="process",
        name=f"p{uuid.uuid4().hex[:8]}",
        db_url=f"sqlite:///{tmp_path}/sb.db",
        state_dir=state,
        monitor_interval_s=None,
    )
    yield m
    m.close(stop_sandboxes=True)
    shutil.rmtree(state, ignore_errors=True)


def play(env: TextEnvProtocol) -> tuple[Any, ...]:
    """Reset, fork by snapshot, step both ways: what rollout code does with any handle."""
    obs, info = env.reset(seed=3)
    assert isinstance(obs, str) and info["action_is_valid"]
    assert "<answer>" in env.system_prompt()
    snapshot = env.get_state()
    moves = env.action_candidates()
    first = env.step(f"<answer>{moves[0]}</answer>")
    env.set_state(snapshot)
    again = env.step(f"<answer>{moves[0]}</answer>")
    assert first == again and len(first) == 5
    env.close()
    return obs, first[:4]


def test_all_four_env_handles_satisfy_the_protocol(manager: SandboxManager, server: ServerProc) -> None:
    with Client(server.url, server.tokens["alice"]) as client:
        handles: list[Any] = [
            hub.make("FrozenLake-v0", **KWARGS).unwrapped,
            hub.make("FrozenLake-v0", **KWARGS),
            manager.open_session("FrozenLake-v0", **KWARGS),
            RemoteEnv(client, "FrozenLake-v0", **KWARGS),
        ]
        assert [type(h) for h in handles[1:]] == [MaxSteps, RemoteSession, RemoteEnv]
        assert isinstance(handles[0], TextEnv)
        for handle in handles:
            assert isinstance(handle, TextEnvProtocol), type(handle).__name__
        outcomes = [play(h) for h in handles]
    assert all(o == outcomes[0] for o in outcomes), outcomes  # same seed, same episode, wherever it runs


def test_objects_without_the_contract_do_not_satisfy_it() -> None:
    class NoPrompt(gym.Env):
        def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
            return "", {}

        def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
            return "", 0.0, True, False, {}

    assert not isinstance(NoPrompt(), TextEnvProtocol)
    assert not isinstance(object(), TextEnvProtocol)
