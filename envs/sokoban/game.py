"""Pure Sokoban game logic: the state, a move, and the reward (no text, no randomness).

Cells are flat indices ``row * cols + col`` into a ``rows x cols`` grid whose border is always
wall. A :class:`SokobanState` is small and cheap to copy; :meth:`SokobanState.move` applies one
of the four directions and reports what happened as a :class:`MoveResult`, and
:func:`step_reward` turns that into the reward the env pays.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "ACTIONS",
    "STEP_PENALTY",
    "BOX_ON_REWARD",
    "BOX_OFF_PENALTY",
    "SOLVED_REWARD",
    "MoveResult",
    "SokobanState",
    "direction_offsets",
    "step_reward",
]

#: the four actions, in the order used for direction indices everywhere in this package
ACTIONS: tuple[str, str, str, str] = ("Up", "Down", "Left", "Right")

STEP_PENALTY = -0.1
BOX_ON_REWARD = 1.0
BOX_OFF_PENALTY = -1.0
SOLVED_REWARD = 10.0


def direction_offsets(cols: int) -> tuple[int, int, int, int]:
    """Flat-index offsets of ``Up, Down, Left, Right`` in a grid ``cols`` wide."""
    return (-cols, cols, -1, 1)


class MoveResult(NamedTuple):
    """What one move did.

    Attributes:
        effective: the player moved (False: blocked by a wall or an unpushable box).
        box_from: the cell a pushed box left, or -1 when no box was pushed.
        box_to: the cell the pushed box entered, or -1.
        pushed_on: a box was pushed onto a target (from a non-target cell).
        pushed_off: a box was pushed off a target (onto a non-target cell).
        solved: every box is on a target after the move.
    """

    effective: bool
    box_from: int
    box_to: int
    pushed_on: bool
    pushed_off: bool
    solved: bool


_BLOCKED = MoveResult(False, -1, -1, False, False, False)


def step_reward(result: MoveResult) -> float:
    """Reward of one legal move: -0.1, +1 per box pushed on a target, -1 per box pushed off one,
    +10 when the move solves the room."""
    reward = STEP_PENALTY
    if result.pushed_on:
        reward += BOX_ON_REWARD
    if result.pushed_off:
        reward += BOX_OFF_PENALTY
    if result.solved:
        reward += SOLVED_REWARD
    return reward


class SokobanState:
    """A room (walls, targets) and the movable pieces (player, boxes).

    Attributes:
        rows, cols: grid size, border included.
        walls: wall cells (the border is always wall).
        targets: target cells.
        boxes: box cells (mutated by :meth:`move`).
        player: the player's cell (mutated by :meth:`move`).
    """

    __slots__ = ("rows", "cols", "walls", "targets", "boxes", "player", "_offsets", "_on_target")

    def __init__(
        self, rows: int, cols: int, walls: frozenset[int], targets: frozenset[int], boxes: set[int], player: int
    ) -> None:
        self.rows = rows
        self.cols = cols
        self.walls = frozenset(walls)
        self.targets = frozenset(targets)
        self.boxes = set(boxes)
        self.player = player
        self._offsets = direction_offsets(cols)
        self._on_target = len(self.boxes & self.targets)
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` unless the state is a well-formed Sokoban position."""
        n = self.rows * self.cols
        cells = (*self.walls, *self.targets, *self.boxes, self.player)
        if any(not isinstance(c, int) or isinstance(c, bool) or not 0 <= c < n for c in cells):
            raise ValueError(f"cell indices must be ints in [0, {n})")
        border = {c for c in range(n) if c < self.cols or c >= n - self.cols or c % self.cols in (0, self.cols - 1)}
        if not border <= self.walls:
            raise ValueError("the border of the room must be wall")
        if self.walls & (self.targets | self.boxes) or self.player in self.walls:
            raise ValueError("walls cannot hold targets, boxes or the player")
        if self.player in self.boxes:
            raise ValueError("the player cannot stand on a box")
        if not self.boxes or len(self.boxes) != len(self.targets):
            raise ValueError(f"need as many boxes as targets (>= 1), got {len(self.boxes)} and {len(self.targets)}")

    # ------------------------------------------------------------------ queries
    @property
    def solved(self) -> bool:
        """Every box is on a target."""
        return self._on_target == len(self.boxes)

    @property
    def boxes_on_target(self) -> int:
        """How many boxes sit on targets."""
        return self._on_target

    def copy(self) -> SokobanState:
        """An independent copy (walls and targets are shared: they are immutable)."""
        new = SokobanState.__new__(SokobanState)
        new.rows, new.cols, new.walls, new.targets = self.rows, self.cols, self.walls, self.targets
        new.boxes, new.player = set(self.boxes), self.player
        new._offsets, new._on_target = self._offsets, self._on_target
        return new

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SokobanState):
            return NotImplemented
        return (self.rows, self.cols, self.walls, self.targets, self.boxes, self.player) == (
            other.rows,
            other.cols,
            other.walls,
            other.targets,
            other.boxes,
            other.player,
        )

    def __repr__(self) -> str:
        return f"SokobanState({self.rows}x{self.cols}, player={self.player}, boxes={sorted(self.boxes)})"

    # ------------------------------------------------------------------- moves
    def move(self, direction: int) -> MoveResult:
        """Move the player in ``direction`` (index into :data:`ACTIONS`), pushing a box if any."""
        step = self._offsets[direction]
        dest = self.player + step
        if dest in self.walls:
            return _BLOCKED
        boxes = self.boxes
        if dest not in boxes:
            self.player = dest
            return MoveResult(True, -1, -1, False, False, self._on_target == len(boxes))
        beyond = dest + step
        if beyond in self.walls or beyond in boxes:
            return _BLOCKED
        boxes.remove(dest)
        boxes.add(beyond)
        self.player = dest
        targets = self.targets
        was_on, now_on = dest in targets, beyond in targets
        self._on_target += now_on - was_on
        return MoveResult(
            True, dest, beyond, now_on and not was_on, was_on and not now_on, self._on_target == len(boxes)
        )
