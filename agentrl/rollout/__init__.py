"""The episode loop: env managers play episodes with an engine; the scheduler runs batches of env groups.

``env_manager`` (one episode, its retries and masks; ``handles`` opens and gives back its envs),
``lockstep`` (every live episode's turn in one batch), ``scheduler`` and ``batch_run`` (a batch of
groups, with redundancy), ``hedging``, ``deadlines``, ``gate`` (pausing generation for weight updates),
``answers`` (restricted answer sets), ``env_mix`` (env ratios), ``async_rollout`` (batches ahead of
training) and ``config`` (their typed settings).

The names below load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rockroll.agentrl._lazy import lazy_exports

if TYPE_CHECKING:
    from rockroll.agentrl.rollout.async_rollout import AsyncRollout
    from rockroll.agentrl.rollout.config import AdaptiveTimeoutConfig, BatchConfig, EpisodeConfig, SchedulerConfig
    from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec, RewardFn, default_reward
    from rockroll.agentrl.rollout.lockstep import LockstepEnvManager, make_env_manager
    from rockroll.agentrl.rollout.scheduler import RolloutBatch, RolloutScheduler

__all__ = [
    "EnvManager",
    "EpisodeSpec",
    "RewardFn",
    "default_reward",
    "LockstepEnvManager",
    "make_env_manager",
    "RolloutScheduler",
    "RolloutBatch",
    "AsyncRollout",
    "AdaptiveTimeoutConfig",
    "BatchConfig",
    "EpisodeConfig",
    "SchedulerConfig",
]

#: name -> the module that defines it, imported the first time the name is asked for
_LAZY = {
    "EnvManager": "rockroll.agentrl.rollout.env_manager",
    "EpisodeSpec": "rockroll.agentrl.rollout.env_manager",
    "RewardFn": "rockroll.agentrl.rollout.env_manager",
    "default_reward": "rockroll.agentrl.rollout.env_manager",
    "LockstepEnvManager": "rockroll.agentrl.rollout.lockstep",
    "make_env_manager": "rockroll.agentrl.rollout.lockstep",
    "RolloutScheduler": "rockroll.agentrl.rollout.scheduler",
    "RolloutBatch": "rockroll.agentrl.rollout.scheduler",
    "AsyncRollout": "rockroll.agentrl.rollout.async_rollout",
    "AdaptiveTimeoutConfig": "rockroll.agentrl.rollout.config",
    "BatchConfig": "rockroll.agentrl.rollout.config",
    "EpisodeConfig": "rockroll.agentrl.rollout.config",
    "SchedulerConfig": "rockroll.agentrl.rollout.config",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
