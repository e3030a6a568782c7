"""FrozenLake as a text env: walk from the start to the goal without falling into a hole."""

from __future__ import annotations

from typing import Any

from rockroll.envs.core import StepOutcome, TextEnv
from rockroll.envs.errors import EnvConfigError
from rockroll.envs.frozenlake.maps import ACTIONS, generate_map, neighbours, shortest_path

__all__ = ["FrozenLakeEnv"]

_ACTION_INDEX = {name.lower(): i for i, name in enumerate(ACTIONS)}
# storage letter -> symbol shown to the agent (player absent)
_SHOW = {"S": "_", "F": "_", "H": "O", "G": "G"}
# storage letter -> symbol when the player stands there
_SHOW_PLAYER = {"S": "P", "F": "P", "H": "X", "G": "√"}


class FrozenLakeEnv(TextEnv[int]):
    """FrozenLake on a random solvable map.

    Args:
        size: side of the square map (2 to 32).
        p: probability that a tile is frozen (the rest are holes), in (0, 1].
        is_slippery: when True the agent moves in the intended direction or one of the two
            perpendicular ones, each with probability 1/3 (gymnasium's FrozenLake rule).
        format_penalty: reward for an unparsable or illegal answer.
    """

    _RULES = (
        "You are walking on a frozen lake, shown as a grid with one row per line.\n"
        "Symbols: P you, _ frozen ice (safe), O a hole, G the goal, "
        "X you fell into a hole, √ you reached the goal.\n"
        "Reach the goal without stepping into a hole. Reward: 1 on reaching the goal, else 0."
    )
    _SLIPPERY = (
        " The ice is slippery: you move in the direction you chose, or in one of the two "
        "perpendicular directions, each with probability 1/3."
    )
    action_format = (
        "Actions: Left, Down, Right, Up (one per turn). Think briefly, then give your action as <answer>Right</answer>."
    )

    def __init__(
        self,
        *,
        size: int = 4,
        p: float = 0.8,
        is_slippery: bool = True,
        format_penalty: float = -0.1,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(format_penalty=format_penalty, render_mode=render_mode)
        if isinstance(size, bool) or not isinstance(size, int) or not 2 <= size <= 32:
            raise EnvConfigError(f"size must be an int from 2 to 32, got {size!r}", env="FrozenLake", param="size")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p <= 1.0:
            raise EnvConfigError(f"p must be a number in (0, 1], got {p!r}", env="FrozenLake", param="p")
        if not isinstance(is_slippery, bool):
            raise EnvConfigError(
                f"is_slippery must be a bool, got {is_slippery!r}", env="FrozenLake", param="is_slippery"
            )
        self.size, self.p, self.is_slippery = size, float(p), is_slippery
        self.instructions = self._RULES + (self._SLIPPERY if is_slippery else "")
        self.grid: tuple[str, ...] = ()
        self.row = self.col = 0
        self._obs = ""

    # ----------------------------------------------------------------- hooks
    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        self.grid = generate_map(self.size, self.p, self.np_random)
        for r, line in enumerate(self.grid):
            c = line.find("S")
            if c >= 0:
                self.row, self.col = r, c
        self._redraw()
        return {}

    def _parse_action(self, answer: str) -> int | None:
        return _ACTION_INDEX.get(answer.strip().lower())

    def _step(self, action: int) -> StepOutcome[int]:
        if self.is_slippery:
            action = (action + int(self.np_random.integers(-1, 2))) % 4
        row, col = neighbours(self.size, self.row, self.col, action)
        moved = (row, col) != (self.row, self.col)
        self.row, self.col = row, col
        tile = self.grid[row][col]
        if moved:
            self._redraw()
        reached = tile == "G"
        return StepOutcome(self._obs, 1.0 if reached else 0.0, tile in "GH", effective=moved, success=reached)

    def _render(self) -> str:
        return self._obs

    def action_candidates(self) -> list[str]:
        return list(ACTIONS)

    def difficulty(self) -> int:
        """The map's difficulty: moves of a shortest hole-free path from the start, ignoring slips."""
        path = shortest_path(self.grid)
        if path is None:
            raise ValueError("this map has no hole-free path from S to G")
        return len(path)

    def _get_state(self) -> dict[str, Any]:
        return {"grid": list(self.grid), "row": self.row, "col": self.col}

    def _set_state(self, data: dict[str, Any]) -> None:
        grid = tuple(str(line) for line in data["grid"])
        row, col = int(data["row"]), int(data["col"])
        if grid and (len(grid) != self.size or not 0 <= row < self.size or not 0 <= col < self.size):
            raise ValueError(f"snapshot is for a {len(grid)}x{len(grid)} map, this env has size {self.size}")
        self.grid, self.row, self.col = grid, row, col
        self._redraw()

    # --------------------------------------------------------------- helpers
    def _redraw(self) -> None:
        if not self.grid:
            self._obs = ""
            return
        lines = []
        for r, line in enumerate(self.grid):
            shown = [_SHOW[ch] for ch in line]
            if r == self.row:
                shown[self.col] = _SHOW_PLAYER[line[self.col]]
            lines.append("".join(shown))
        self._obs = "\n".join(lines)
