"""FrozenLake map generation and shortest-path planning (pure functions on tile grids).

A map is a tuple of strings, one per row, using ``S`` start, ``F`` frozen, ``H`` hole, ``G``
goal (the storage alphabet; rendering uses the agent-facing symbols, see ``env.py``).
"""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["ACTIONS", "MOVES", "generate_map", "shortest_path", "neighbours"]

#: action names in gymnasium's FrozenLake order (0 Left, 1 Down, 2 Right, 3 Up)
ACTIONS: tuple[str, ...] = ("Left", "Down", "Right", "Up")
MOVES: tuple[tuple[int, int], ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))
_MAX_TRIES = 10_000


def neighbours(size: int, row: int, col: int, action: int) -> tuple[int, int]:
    """The tile reached by ``action`` from (row, col); moving off the map stays put."""
    dr, dc = MOVES[action]
    nr, nc = row + dr, col + dc
    if 0 <= nr < size and 0 <= nc < size:
        return nr, nc
    return row, col


def shortest_path(grid: tuple[str, ...] | list[str]) -> list[str] | None:
    """Shortest action list from ``S`` to ``G`` avoiding holes (no slipping), or None."""
    size = len(grid)
    start = goal = None
    for r, line in enumerate(grid):
        for c, ch in enumerate(line):
            if ch == "S":
                start = (r, c)
            elif ch == "G":
                goal = (r, c)
    if start is None or goal is None:
        return None
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    queue = deque([start])
    while queue:
        cur = queue.popleft()
        if cur == goal:
            plan: list[str] = []
            while (link := parent[cur]) is not None:
                prev, a = link
                plan.append(ACTIONS[a])
                cur = prev
            return plan[::-1]
        for a in range(4):
            nxt = neighbours(size, cur[0], cur[1], a)
            if nxt not in parent and grid[nxt[0]][nxt[1]] != "H":
                parent[nxt] = (cur, a)
                queue.append(nxt)
    return None


def generate_map(size: int, p: float, rng: np.random.Generator) -> tuple[str, ...]:
    """A random ``size``x``size`` map whose tiles are frozen with probability ``p``.

    Start and goal are distinct random tiles, and the map always has a hole-free path between
    them (maps without one are redrawn).
    """
    cells = size * size
    for _ in range(_MAX_TRIES):
        frozen = rng.random(cells) < p
        start, goal = (int(i) for i in rng.choice(cells, size=2, replace=False))
        tiles = ["F" if f else "H" for f in frozen]
        tiles[start], tiles[goal] = "S", "G"
        grid = tuple("".join(tiles[r * size : (r + 1) * size]) for r in range(size))
        if shortest_path(grid) is not None:
            return grid
    raise RuntimeError(f"no solvable {size}x{size} map found with p={p}")  # p is validated > 0
