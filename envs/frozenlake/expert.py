"""The FrozenLake expert: follow a shortest hole-free path from the current tile."""

from __future__ import annotations

from rockroll.envs.frozenlake.env import FrozenLakeEnv
from rockroll.envs.frozenlake.maps import shortest_path

__all__ = ["next_action"]


def next_action(env: FrozenLakeEnv) -> str | None:
    """First move of a shortest path from the player's tile to the goal (None if none)."""
    grid = [line.replace("S", "F") for line in env.grid]
    row = grid[env.row]
    grid[env.row] = row[: env.col] + "S" + row[env.col + 1 :]
    plan = shortest_path(grid)
    return plan[0] if plan else None
