"""Sokoban: push every box onto a target, on a text grid.

* :class:`SokobanEnv` -- the text env (registered as ``Sokoban-v0``, ``SimpleSokoban-v0``,
  ``LargerSokoban-v0``, ``SokobanDifferentGridVocab-v0``).
* :func:`generate_room` -- solvable rooms by reverse play (also used by ``bench/``).
* :func:`solve` -- an exact breadth-first solver returning the shortest plan.
* :class:`SokobanState`, :func:`step_reward` -- the pure game logic.
* :func:`render_grid`, :func:`parse_grid`, :data:`VOCABS` -- text in and out.
"""

from rockroll.envs.sokoban.env import SokobanEnv
from rockroll.envs.sokoban.errors import GenerationError, SolverLimitError
from rockroll.envs.sokoban.game import ACTIONS, MoveResult, SokobanState, step_reward
from rockroll.envs.sokoban.generator import GeneratedRoom, generate_room, max_boxes
from rockroll.envs.sokoban.render import VOCABS, Vocab, parse_grid, render_grid
from rockroll.envs.sokoban.solver import solve

__all__ = [
    "ACTIONS",
    "VOCABS",
    "GeneratedRoom",
    "GenerationError",
    "MoveResult",
    "SokobanEnv",
    "SokobanState",
    "SolverLimitError",
    "Vocab",
    "generate_room",
    "max_boxes",
    "parse_grid",
    "render_grid",
    "solve",
    "step_reward",
]
