"""Every built-in env family has an expert, and the expert wins where the game allows it."""

from __future__ import annotations

import pytest

import rockroll.envhub as envhub
from rockroll.envs.experts import expert_for, has_expert
from rockroll.envs.play import play_episode

# ids whose expert must win every episode (no randomness the expert cannot control)
DETERMINISTIC = [
    ("FrozenLake-v0", {"is_slippery": False}),
    ("SimpleSokoban-v0", {}),
    ("LargerSokoban-v0", {}),
    ("SokobanDifferentGridVocab-v0", {}),
    ("ALFWorld-v0", {}),
    ("WebShop-v0", {}),
]


@pytest.mark.parametrize(("env_id", "kwargs"), DETERMINISTIC)
def test_expert_wins_and_random_does_worse(env_id: str, kwargs: dict) -> None:
    env = envhub.make(env_id, **kwargs)
    assert has_expert(env)
    expert = [play_episode(env, "expert", seed) for seed in range(20)]
    rand = [play_episode(env, "random", seed) for seed in range(20)]
    assert all(r.success for r in expert), [r.seed for r in expert if not r.success]
    assert sum(r.success for r in rand) < 20
    assert sum(r.total_reward for r in expert) > sum(r.total_reward for r in rand)


def test_unknown_env_has_no_expert() -> None:
    class Plain:
        pass

    assert not has_expert(Plain())
    with pytest.raises(LookupError, match="no expert policy for Plain"):
        expert_for(Plain())
