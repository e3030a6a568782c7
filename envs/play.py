"""Play whole episodes with a simple policy (random or expert): the scripted demo and smoke runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.experts import expert_for

__all__ = ["EpisodeResult", "play_episode", "POLICIES"]

POLICIES = ("random", "expert")


@dataclass
class EpisodeResult:
    """Outcome of one episode."""

    seed: int
    steps: int = 0
    total_reward: float = 0.0
    success: bool = False
    terminated: bool = False
    truncated: bool = False
    invalid_actions: int = 0
    frames: list[str] = field(default_factory=list)


def play_episode(
    env: TextEnvProtocol,
    policy: str,
    seed: int,
    *,
    record: bool = False,
    on_step: Callable[[str, str, float], None] | None = None,
) -> EpisodeResult:
    """Reset ``env`` with ``seed`` and play until it terminates or truncates.

    ``policy`` is ``"random"`` (uniform over ``action_candidates()``, seeded by ``seed``) or
    ``"expert"`` (the env's privileged solver, see :mod:`rockroll.envs.experts`).
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    result = EpisodeResult(seed=seed)
    if record:
        result.frames.append(obs)
    expert = expert_for(env) if policy == "expert" else None
    while True:
        if expert is not None:
            move = expert()
        else:
            candidates = env.action_candidates()
            move = str(rng.choice(candidates)) if candidates else None
        action = f"<answer>{move}</answer>" if move is not None else "<answer></answer>"
        obs, reward, terminated, truncated, info = env.step(action)
        result.steps += 1
        result.total_reward += float(reward)
        result.invalid_actions += 0 if info["action_is_valid"] else 1
        result.success = bool(info["success"])
        if record:
            result.frames.append(obs)
        if on_step is not None:
            on_step(action, obs, float(reward))
        if terminated or truncated:
            result.terminated, result.truncated = bool(terminated), bool(truncated)
            return result
