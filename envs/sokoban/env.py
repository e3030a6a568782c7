"""The Sokoban text environment: push every box onto a target.

Each episode plays a room made by :func:`rockroll.envs.sokoban.generator.generate_room` from the env's
``np_random`` (so ``reset(seed=s)`` always gives the same room), or a hand-drawn room passed
as ``reset(options={"grid": "..."})`` (drawn with the env's ``grid_vocab``).

The observation is the grid, one row per line. Actions are ``Up``, ``Down``, ``Left``,
``Right`` inside ``<answer>...</answer>`` (case-insensitive). A move into a wall or into a box
that cannot be pushed is legal but not effective. Rewards: -0.1 per move, +1 for pushing a box
onto a target, -1 for pushing one off, +10 when every box is on a target (the episode then
terminates with ``success=True``). Step limits belong to :class:`rockroll.envs.wrappers.MaxSteps`.
"""

from __future__ import annotations

from typing import Any

from rockroll.envs.core import DEFAULT_FORMAT_PENALTY, StepOutcome, TextEnv
from rockroll.envs.errors import EnvConfigError, ResetNeeded
from rockroll.envs.sokoban.errors import SolverLimitError
from rockroll.envs.sokoban.game import ACTIONS, SokobanState, step_reward
from rockroll.envs.sokoban.generator import check_room_params, generate_room
from rockroll.envs.sokoban.render import GridCanvas, Vocab, get_vocab, parse_grid, render_grid
from rockroll.envs.sokoban.solver import solve

__all__ = ["SokobanEnv"]

_ACTION_INDEX = {name.lower(): i for i, name in enumerate(ACTIONS)}

_INSTRUCTIONS = """\
You are playing Sokoban, a warehouse puzzle. The room is shown as a grid of symbols, one row per
line, with the top row first:
{legend}

Goal: push every box onto a target.

Each turn you move one cell Up, Down, Left or Right. Walking into a box pushes it one cell in
the same direction, but only if the cell behind it is empty floor or a target (not a wall, not
another box). You cannot pull boxes, so a box pushed into a corner is stuck for good. Moving into
a wall or an unpushable box does nothing.

Rewards: -0.1 for every move, +1 for pushing a box onto a target, -1 for pushing a box off a
target, and +10 when all boxes are on targets, which ends the game."""

_ACTION_FORMAT = (
    "Answer with exactly one action inside <answer>...</answer>: one of Up, Down, Left, Right. "
    "For example: <answer>Left</answer>"
)


class SokobanEnv(TextEnv[int]):
    """Sokoban on a text grid (see the module docstring).

    Args:
        dim_room: ``(rows, cols)`` of generated rooms, border walls included (4 to 20).
        num_boxes: boxes per room (1 to :func:`~rockroll.envs.sokoban.generator.max_boxes`).
        search_depth: pulls explored by the reverse-play generator (1 to 1000).
        grid_vocab: symbol set, ``"default"`` or ``"alt"`` (see :mod:`rockroll.envs.sokoban.render`).
        format_penalty: reward for an answer that is not one of the four actions.
        render_mode: None or ``"ansi"``.
    """

    action_format = _ACTION_FORMAT

    def __init__(
        self,
        *,
        dim_room: tuple[int, int] | list[int] = (6, 6),
        num_boxes: int = 1,
        search_depth: int = 30,
        grid_vocab: str = "default",
        format_penalty: float = DEFAULT_FORMAT_PENALTY,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(format_penalty=format_penalty, render_mode=render_mode)
        check_room_params(dim_room, num_boxes, search_depth, env=type(self).__name__)
        self.dim_room = (int(dim_room[0]), int(dim_room[1]))
        self.num_boxes = int(num_boxes)
        self.search_depth = int(search_depth)
        self.grid_vocab = grid_vocab
        self.vocab: Vocab = get_vocab(grid_vocab)
        self.instructions = _INSTRUCTIONS.format(legend=self.vocab.legend())
        self._state: SokobanState | None = None
        self._canvas: GridCanvas | None = None
        self._start: SokobanState | None = None  # the room as reset left it (for :meth:`difficulty`)

    # ----------------------------------------------------------------- hooks
    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        grid = options.get("grid")
        if grid is not None:
            state = parse_grid(grid, self.vocab)
            if state.solved:
                raise EnvConfigError("options['grid'] is already solved", env=type(self).__name__, param="options")
            min_pushes = None
        else:
            room = generate_room(self.dim_room, self.num_boxes, self.search_depth, self.np_random)
            state, min_pushes = room.state, (room.pushes if room.exact else None)
        self._load(state)
        self._start = state.copy()
        return {"min_pushes": min_pushes}

    def _parse_action(self, answer: str) -> int | None:
        return _ACTION_INDEX.get(answer.strip().lower())

    def _step(self, action: int) -> StepOutcome[int]:
        state, canvas = self._state, self._canvas
        if state is None or canvas is None:
            raise ResetNeeded("no room yet: call reset() first")
        before = state.player
        result = state.move(action)
        if result.effective:
            if result.box_to >= 0:
                canvas.refresh(before, state.player, result.box_to)
            else:
                canvas.refresh(before, state.player)
        return StepOutcome(
            canvas.text, step_reward(result), result.solved, effective=result.effective, success=result.solved
        )

    def _render(self) -> str:
        if self._canvas is None:
            return ""
        return self._canvas.text

    def _get_state(self) -> dict[str, Any]:
        if self._state is None:
            return {"grid": None}
        return {"grid": render_grid(self._state, "default").split("\n")}

    def _set_state(self, data: dict[str, Any]) -> None:
        grid = data["grid"]
        if grid is None:
            self._state = self._canvas = None
        else:
            self._load(parse_grid(list(grid), "default"))

    def action_candidates(self) -> list[str]:
        return list(ACTIONS)

    def difficulty(self) -> int | None:
        """The room's difficulty: moves of a shortest solution from where the episode started (None
        before a reset, or when the solver gives up)."""
        if self._start is None:
            return None
        try:
            plan = solve(self._start)
        except SolverLimitError:
            return None
        return None if plan is None else len(plan)

    # --------------------------------------------------------------- helpers
    def _load(self, state: SokobanState) -> None:
        self._state = state
        self._canvas = GridCanvas(state, self.vocab)

    @property
    def game_state(self) -> SokobanState:
        """A copy of the current position (for the solver or analysis)."""
        if self._state is None:
            raise ResetNeeded("no room yet: call reset() first")
        return self._state.copy()
