"""FrozenLake (``FrozenLake-v0``): random solvable maps, optional slippery ice."""

from rockroll.envs.frozenlake.env import FrozenLakeEnv
from rockroll.envs.frozenlake.maps import ACTIONS, generate_map, shortest_path

__all__ = ["ACTIONS", "FrozenLakeEnv", "generate_map", "shortest_path"]
