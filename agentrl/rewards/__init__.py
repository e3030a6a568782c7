"""Rewards of single-turn RLVR: a registry of reward kinds, routing by sample tag, and datasets.

The trainer's path::

    router = RewardRouter(cfg["rewards"])                        # tag -> reward + options (ConfigError on bad keys)
    samples = load_jsonl("data/train.jsonl", requires=router.required_fields)   # checked rows
    outcomes = await router.score_batch(samples, responses)     # RewardOutcome: score, infra, details, latency
    scores = [o.score for o in outcomes]; mask = [not o.infra for o in outcomes]
    metrics = route_metrics(outcomes)                            # reward/<tag>/mean, infra_failures, latency_s

Built-in rewards (:data:`REWARDS`): ``math`` (math-verify), ``code`` (tests in process sandboxes),
``judge`` (an OpenAI-compatible endpoint), ``exact``, ``regex``, ``countdown``. Generators
(:data:`GENERATORS`): ``arithmetic``, ``countdown``, ``python_functions``.
"""

from rockroll.agentrl.rewards.base import REWARDS, Reward, RewardResult, make_reward, register_reward
from rockroll.agentrl.rewards.errors import (
    DatasetRowError,
    JudgeEndpointError,
    JudgeParseError,
    RewardError,
    UnknownRewardError,
    UnknownTagError,
)
from rockroll.agentrl.rewards.generators import GENERATORS, arithmetic, countdown, generate, python_functions
from rockroll.agentrl.rewards.router import (
    RewardOutcome,
    RewardRouter,
    RewardRouterConfig,
    RouteConfig,
    route_metrics,
)
from rockroll.agentrl.rewards.samples import Sample, load_hf_disk, load_jsonl, split_of, split_samples

__all__ = [
    "REWARDS",
    "GENERATORS",
    "Reward",
    "RewardResult",
    "make_reward",
    "register_reward",
    "RewardRouter",
    "RewardRouterConfig",
    "RouteConfig",
    "RewardOutcome",
    "route_metrics",
    "Sample",
    "load_jsonl",
    "load_hf_disk",
    "split_of",
    "split_samples",
    "generate",
    "arithmetic",
    "countdown",
    "python_functions",
    "RewardError",
    "UnknownRewardError",
    "UnknownTagError",
    "DatasetRowError",
    "JudgeParseError",
    "JudgeEndpointError",
]
