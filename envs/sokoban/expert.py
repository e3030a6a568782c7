"""The Sokoban expert: the first move of an optimal plan from the current position."""

from __future__ import annotations

from rockroll.envs.sokoban.env import SokobanEnv
from rockroll.envs.sokoban.solver import solve

__all__ = ["next_action"]


def next_action(env: SokobanEnv) -> str | None:
    """First action of a shortest solution (None when the room can no longer be solved)."""
    plan = solve(env.game_state)
    return plan[0] if plan else None
