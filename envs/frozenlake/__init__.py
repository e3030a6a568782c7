"""FrozenLake (``FrozenLake-v0``): random solvable maps, optional slippery ice."""

from rockroll.envs.frozenlake.env import FrozenLakeEnv
from rockroll.envs.frozenlake.exact import (
    best_blind_success,
    blind_success,
    map_for_seed,
    noslip_plan_blind_success,
    optimal_success,
    policy_success,
    references,
)
from rockroll.envs.frozenlake.maps import ACTIONS, generate_map, shortest_path

__all__ = [
    "ACTIONS",
    "FrozenLakeEnv",
    "best_blind_success",
    "blind_success",
    "generate_map",
    "map_for_seed",
    "noslip_plan_blind_success",
    "optimal_success",
    "policy_success",
    "references",
    "shortest_path",
]
