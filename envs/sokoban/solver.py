"""An exact Sokoban solver: the shortest plan in moves, by breadth-first search.

A search node is ``(player, boxes)`` packed into one int (boxes as a bitmask). Every move costs
one step, so breadth-first order finds a plan with the fewest moves. Pushes onto *dead cells*
(cells from which a box can never reach any target, even alone in the room) are skipped; that
removes only positions that cannot be solved, so the plan stays optimal.

Used by the tests to check that every generated room is solvable, and as an expert for
demonstrations::

    plan = solve(env.unwrapped.game_state)   # e.g. ["Left", "Up", "Up"], or None
"""

from __future__ import annotations

from rockroll.envs.sokoban.errors import SolverLimitError
from rockroll.envs.sokoban.game import ACTIONS, SokobanState, direction_offsets
from rockroll.envs.sokoban.render import Vocab, parse_grid

__all__ = ["solve", "live_cells", "DEFAULT_MAX_STATES"]

DEFAULT_MAX_STATES = 2_000_000


def live_cells(state: SokobanState) -> bytearray:
    """Flags per cell: 1 where a box, alone in the room, could still be pushed to some target."""
    n = state.rows * state.cols
    walls = state.walls
    offsets = direction_offsets(state.cols)
    live = bytearray(n)
    stack = list(state.targets)
    for t in stack:
        live[t] = 1
    while stack:
        cell = stack.pop()
        for off in offsets:
            # a box at `prev` pushed by a player at `prev - off` lands on `cell`
            prev = cell - off
            player = prev - off
            if 0 <= player < n and not live[prev] and prev not in walls and player not in walls:
                live[prev] = 1
                stack.append(prev)
    return live


def solve(
    puzzle: SokobanState | str | list[str],
    vocab: Vocab | str = "default",
    *,
    max_states: int = DEFAULT_MAX_STATES,
) -> list[str] | None:
    """The shortest list of actions (``"Up"``...) that puts every box on a target.

    Args:
        puzzle: a :class:`SokobanState`, or a grid (text or list of rows) drawn with ``vocab``.
        vocab: the symbol set of a grid given as text.
        max_states: positions to visit before giving up.

    Returns:
        The plan (``[]`` if already solved), or None when the room cannot be solved.

    Raises:
        SolverLimitError: more than ``max_states`` positions were visited.
    """
    state = puzzle if isinstance(puzzle, SokobanState) else parse_grid(puzzle, vocab)
    n = state.rows * state.cols
    shift = n.bit_length()
    player_mask = (1 << shift) - 1
    open_cells = bytearray(n)
    for cell in range(n):
        if cell not in state.walls:
            open_cells[cell] = 1
    live = live_cells(state)
    offsets = tuple(enumerate(direction_offsets(state.cols)))
    goal = 0
    for cell in state.targets:
        goal |= 1 << cell
    boxes0 = 0
    for cell in state.boxes:
        boxes0 |= 1 << cell
    if boxes0 == goal:
        return []

    start = (boxes0 << shift) | state.player
    parent: dict[int, tuple[int, int]] = {start: (-1, -1)}
    frontier = [start]
    while frontier:
        nxt: list[int] = []
        for key in frontier:
            boxes = key >> shift
            player = key & player_mask
            for action, off in offsets:
                dest = player + off
                if not open_cells[dest]:
                    continue
                if (boxes >> dest) & 1:
                    beyond = dest + off
                    if not live[beyond] or (boxes >> beyond) & 1:
                        continue
                    new_boxes = boxes ^ (1 << dest) ^ (1 << beyond)
                else:
                    new_boxes = boxes
                new_key = (new_boxes << shift) | dest
                if new_key in parent:
                    continue
                parent[new_key] = (key, action)
                if new_boxes == goal:
                    return _plan(parent, new_key)
                nxt.append(new_key)
        if len(parent) > max_states:
            raise SolverLimitError(max_states)
        frontier = nxt
    return None


def _plan(parent: dict[int, tuple[int, int]], key: int) -> list[str]:
    """Follow parent links back to the start and return the actions in order."""
    actions: list[str] = []
    prev, action = parent[key]
    while action >= 0:
        actions.append(ACTIONS[action])
        key = prev
        prev, action = parent[key]
    actions.reverse()
    return actions
