"""Errors specific to the Sokoban package (all derive from :class:`rockroll.envs.errors.EnvError`)."""

from __future__ import annotations

from rockroll.envs.errors import EnvError

__all__ = ["GenerationError", "SolverLimitError"]


class GenerationError(EnvError, RuntimeError):
    """No acceptable room was found within the allowed number of attempts.

    Attributes:
        dim_room: the requested room size.
        num_boxes: the requested number of boxes.
        attempts: how many layouts were tried.
    """

    def __init__(self, dim_room: tuple[int, int], num_boxes: int, attempts: int) -> None:
        super().__init__(
            f"could not generate a {dim_room[0]}x{dim_room[1]} Sokoban room with {num_boxes} box(es) in "
            f"{attempts} attempts; use fewer boxes, a larger room or a larger search_depth"
        )
        self.dim_room = dim_room
        self.num_boxes = num_boxes
        self.attempts = attempts


class SolverLimitError(EnvError, RuntimeError):
    """The solver visited ``max_states`` states without deciding whether the room is solvable."""

    def __init__(self, max_states: int) -> None:
        super().__init__(f"solver gave up after {max_states} states; raise max_states or use a smaller room")
        self.max_states = max_states
