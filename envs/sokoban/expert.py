"""The Sokoban expert: the first move of an optimal plan from the current position."""

from __future__ import annotations

from collections.abc import Callable

from rockroll.envs.experts import unwrapped_as
from rockroll.envs.sokoban.env import SokobanEnv
from rockroll.envs.sokoban.solver import solve

__all__ = ["expert", "next_action"]


def next_action(env: SokobanEnv) -> str | None:
    """First action of a shortest solution (None when the room can no longer be solved)."""
    plan = solve(env.game_state)
    return plan[0] if plan else None


def expert(env: object) -> Callable[[], str | None]:
    """The expert factory named on the env's spec (see :mod:`rockroll.envs.experts`)."""
    inner = unwrapped_as(env, SokobanEnv)
    return lambda: next_action(inner)
