"""FrozenLake maps as numpy arrays for the exact references of :mod:`rockroll.envs.frozenlake.exact`.

:class:`MapBatch` holds maps of one size (holes, goals, starts per cell ``row * size + col``, the move
table) and pushes values back and distributions forward under the env's slip rule; :func:`map_for_seed`
gives the map an env seed draws. Split from :mod:`rockroll.envs.frozenlake.exact`, which re-exports
:func:`map_for_seed`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from rockroll.envs.frozenlake.env import FrozenLakeEnv
from rockroll.envs.frozenlake.maps import ACTIONS, MOVES

__all__ = [
    "ACTION_INDEX",
    "Action",
    "Grid",
    "MapBatch",
    "Policy",
    "action_index",
    "at_start",
    "check_steps",
    "map_for_seed",
    "maps_for_seeds",
]

Grid = Sequence[str]
#: an action as its index (0 Left, 1 Down, 2 Right, 3 Up) or its name (case-insensitive)
Action = int | str
Policy = Callable[[int, int], Action] | Mapping[tuple[int, int], Action]

ACTION_INDEX = {name.lower(): i for i, name in enumerate(ACTIONS)}


# ------------------------------------------------------------------------------------------ maps
def map_for_seed(seed: int, size: int = 4, p: float = 0.8) -> tuple[str, ...]:
    """The map ``FrozenLakeEnv(size=size, p=p)`` (so ``envhub.make("FrozenLake-v0", ...)``) draws
    at ``reset(seed=seed)``; slipping does not change the map."""
    return maps_for_seeds([seed], size, p)[0]


def maps_for_seeds(seeds: Sequence[int], size: int, p: float) -> list[tuple[str, ...]]:
    env = FrozenLakeEnv(size=size, p=p, is_slippery=True)
    out = []
    for seed in seeds:
        env.reset(seed=int(seed))
        out.append(env.grid)
    env.close()
    return out


def action_index(action: Action) -> int:
    if isinstance(action, str):
        idx = ACTION_INDEX.get(action.strip().lower())
        if idx is None:
            raise ValueError(f"unknown action {action!r}; expected one of {ACTIONS} or 0-3")
        return idx
    if isinstance(action, bool) or not isinstance(action, (int, np.integer)) or not 0 <= action < 4:
        raise ValueError(f"unknown action {action!r}; expected one of {ACTIONS} or 0-3")
    return int(action)


class MapBatch:
    """Maps of one size as arrays: holes, goals and starts per cell, the move table."""

    def __init__(self, grids: Sequence[Grid]) -> None:
        if not grids:
            raise ValueError("need at least one map")
        size = len(grids[0])
        cells = size * size
        letters = np.empty((len(grids), cells), dtype="<U1")
        for b, grid in enumerate(grids):
            if len(grid) != size or any(len(line) != size for line in grid):
                raise ValueError(f"map {b} is not a {size}x{size} square: {list(grid)!r}")
            letters[b] = list("".join(grid))
        if not np.isin(letters, list("SFHG")).all():
            raise ValueError("maps may only use the letters S, F, H, G")
        if not ((letters == "S").sum(1) == 1).all() or not ((letters == "G").sum(1) == 1).all():
            raise ValueError("every map needs exactly one S and one G")
        self.grids = [tuple(grid) for grid in grids]
        self.size, self.cells, self.n = size, cells, len(grids)
        self.hole = letters == "H"
        self.goal = letters == "G"
        self.alive = ~(self.hole | self.goal)
        self.start = np.argmax(letters == "S", axis=1)
        # nb[d, s]: the cell reached from s by moving in direction d (off the map: s itself)
        rows, cols = np.divmod(np.arange(cells), size)
        nb = np.empty((4, cells), dtype=np.int64)
        for d, (dr, dc) in enumerate(MOVES):
            r, c = rows + dr, cols + dc
            inside = (r >= 0) & (r < size) & (c >= 0) & (c < size)
            nb[d] = np.where(inside, r * size + c, np.arange(cells))
        self.nb = nb
        # move[d] as a 0/1 matrix for pushing a distribution forward: p @ push[d]
        push = np.zeros((4, cells, cells))
        push[np.arange(4)[:, None], np.arange(cells)[None, :], nb] = 1.0
        self.push = push

    def backup(self, value: np.ndarray, slippery: bool) -> np.ndarray:
        """Q[b, a, s]: success probability of action a at s, then ``value`` (B, N) afterwards."""
        moved = value[:, self.nb]  # (B, 4 directions, N)
        if not slippery:
            return moved
        return (np.roll(moved, 1, axis=1) + moved + np.roll(moved, -1, axis=1)) / 3.0

    def settle(self, value: np.ndarray) -> np.ndarray:
        """Terminal cells keep their outcome: 1 at the goal, 0 in a hole."""
        return np.where(self.alive, value, self.goal.astype(float))

    def forward(self, dist: np.ndarray, slippery: bool) -> np.ndarray:
        """Next-cell distribution for every action: (..., N) -> (..., 4 actions, N)."""
        moved = np.stack([dist @ self.push[d] for d in range(4)], axis=-2)
        if not slippery:
            return moved
        return (np.roll(moved, 1, axis=-2) + moved + np.roll(moved, -1, axis=-2)) / 3.0


def at_start(batch: MapBatch, value: np.ndarray) -> np.ndarray:
    return value[np.arange(batch.n), batch.start]


def check_steps(steps: int) -> int:
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    return int(steps)
