"""The FrozenLake expert: follow a shortest hole-free path from the current tile."""

from __future__ import annotations

from collections.abc import Callable

from rockroll.envs.experts import unwrapped_as
from rockroll.envs.frozenlake.env import FrozenLakeEnv
from rockroll.envs.frozenlake.maps import shortest_path

__all__ = ["expert", "next_action"]


def next_action(env: FrozenLakeEnv) -> str | None:
    """First move of a shortest path from the player's tile to the goal (None if none)."""
    grid = [line.replace("S", "F") for line in env.grid]
    row = grid[env.row]
    grid[env.row] = row[: env.col] + "S" + row[env.col + 1 :]
    plan = shortest_path(grid)
    return plan[0] if plan else None


def expert(env: object) -> Callable[[], str | None]:
    """The expert factory named on the env's spec (see :mod:`rockroll.envs.experts`)."""
    inner = unwrapped_as(env, FrozenLakeEnv)
    return lambda: next_action(inner)
