"""FrozenLake (``FrozenLake-v0``): random solvable maps, optional slippery ice."""

from envs.frozenlake.env import FrozenLakeEnv
from envs.frozenlake.maps import ACTIONS, generate_map, shortest_path

__all__ = ["ACTIONS", "FrozenLakeEnv", "generate_map", "shortest_path"]
