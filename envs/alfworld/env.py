"""``ALFWorld-v0``: ALFWorld's household tasks as a text env, on procedurally generated homes.

The agent reads TextWorld-style feedback ("You arrive at countertop 1. On the countertop 1, you
see a mug 1, and a apple 2.") and answers with one command of ALFWorld's grammar (see
:mod:`rockroll.envs.alfworld.commands`). ``info["admissible_commands"]`` lists the commands that do
something; any other answer is a no-op answered "Nothing happens." that costs
``format_penalty``. Reward 1 (and ``terminated``) when the goal holds, else 0.
"""

from __future__ import annotations

from typing import Any

from rockroll.envs.alfworld import commands, text
from rockroll.envs.alfworld.catalog import TASK_ALIASES, TASK_TYPES
from rockroll.envs.alfworld.generator import MAX_ROOMS, GenConfig, generate
from rockroll.envs.alfworld.tasks import goal_satisfied, resolve_task_types
from rockroll.envs.alfworld.world import World
from rockroll.envs.core import DEFAULT_FORMAT_PENALTY, StepOutcome, TextEnv
from rockroll.envs.errors import EnvConfigError

__all__ = ["ALFWorldEnv"]

_ENV = "ALFWorld"
_LOOKING = frozenset({"look", "inventory"})


def _check_int(value: object, name: str, low: int, high: int, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        none = " or None" if optional else ""
        raise EnvConfigError(f"{name} must be an int from {low} to {high}{none}, got {value!r}", env=_ENV, param=name)


class ALFWorldEnv(TextEnv[str]):
    """ALFWorld-style household tasks in generated homes.

    Args:
        task_types: task types to draw from, by name (``"pick_and_place_simple"``,
            ``"look_at_obj_in_light"``, ``"pick_clean_then_place_in_recep"``,
            ``"pick_heat_then_place_in_recep"``, ``"pick_cool_then_place_in_recep"``,
            ``"pick_two_obj_and_place"``) or short name (``pick``, ``look``, ``clean``, ``heat``,
            ``cool``, ``pick_two``). None: all six, like ALFWorld.
        num_rooms: rooms in the home, 1 to 4 (ALFWorld: 1). More rooms, more places to search.
        num_receptacles: receptacles per room, 5 to 40 (never fewer than the room type's
            required ones); None: random per room type (8 to 28, like ALFWorld's scenes).
        num_distractors: objects per room besides the task's, 0 to 60; None: random, 8 to 20.
        format_penalty: reward of an answer that is not an admissible command.
    """

    instructions = (
        "You are a household robot in a home with receptacles (cabinet, drawer, fridge, countertop, ...) "
        "and objects (mug, apple, pencil, ...), all named with a number, e.g. 'mug 1', 'cabinet 3'. "
        "Complete the task given in the first observation.\n"
        "Commands: go to <receptacle>; open <receptacle>; close <receptacle>; take <object> from "
        "<receptacle>; put <object> in/on <receptacle>; clean <object> with <receptacle>; heat <object> "
        "with <receptacle>; cool <object> with <receptacle>; use <object>; examine <object or receptacle>; "
        "look; inventory.\n"
        "You carry one object at a time. Closed receptacles must be opened to see or use what is inside. "
        "Clean with a sinkbasin (or bathtubbasin), heat with a microwave, cool with a fridge; to look at an object under a "
        "lamp, hold it where the lamp is and use the lamp. A command that does nothing gets 'Nothing happens.'\n"
        "Reward: 1 when the task is done, else 0."
    )
    action_format = "Give exactly one command per turn, e.g. <answer>go to countertop 1</answer>."

    def __init__(
        self,
        *,
        task_types: list[str] | tuple[str, ...] | None = None,
        num_rooms: int = 1,
        num_receptacles: int | None = None,
        num_distractors: int | None = None,
        format_penalty: float = DEFAULT_FORMAT_PENALTY,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(format_penalty=format_penalty, render_mode=render_mode)
        try:
            types = resolve_task_types(task_types)
        except ValueError as e:
            raise EnvConfigError(str(e), env=_ENV, param="task_types") from e
        _check_int(num_rooms, "num_rooms", 1, MAX_ROOMS)
        _check_int(num_receptacles, "num_receptacles", 5, 40, optional=True)
        _check_int(num_distractors, "num_distractors", 0, 60, optional=True)
        self.config = GenConfig(types, num_rooms, num_receptacles, num_distractors)
        self.world: World | None = None
        self._obs = ""
        self._admissible: list[str] = []
        self._admissible_set: frozenset[str] = frozenset()

    # ----------------------------------------------------------------- hooks
    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        self.world = generate(self.np_random, self.config)
        self._obs = text.intro(self.world)
        self._refresh()
        return {}

    def _parse_action(self, answer: str) -> str | None:
        cmd = commands.normalize(answer)
        return cmd if cmd in self._admissible_set else None

    def _step(self, action: str) -> StepOutcome[str]:
        world = self._require_world()
        feedback, effective = commands.execute(world, action)
        self._obs = feedback
        done = effective and goal_satisfied(world)
        self._refresh()
        return StepOutcome(feedback, 1.0 if done else 0.0, done, effective=effective, success=done)

    def _render(self) -> str:
        return self._obs

    def _invalid_observation(self, answer: str | None) -> str:
        return text.NOTHING_HAPPENS

    def _extra_info(self) -> dict[str, Any]:
        task = self.world.task if self.world is not None else None
        return {
            "admissible_commands": list(self._admissible),
            "task_type": task.type if task else None,
            "goal": task.text if task else None,
        }

    def action_candidates(self) -> list[str]:
        return list(self._admissible)

    def category(self) -> str | None:
        """The episode's task type by its short name (``pick``, ``look``, ``clean``, ``heat``, ``cool``,
        ``pick_two``): reports split success by it. None before a reset."""
        if self.world is None:
            return None
        return next(
            (short for short, name in TASK_ALIASES.items() if name == self.world.task.type), self.world.task.type
        )

    def _get_state(self) -> dict[str, Any]:
        return {"world": None if self.world is None else self.world.to_dict(), "obs": self._obs}

    def _set_state(self, data: dict[str, Any]) -> None:
        world = None if data["world"] is None else World.from_dict(data["world"])
        obs = data["obs"]
        if not isinstance(obs, str):
            raise TypeError("obs must be a str")
        self.world, self._obs = world, obs
        self._refresh()

    # --------------------------------------------------------------- helpers
    def _require_world(self) -> World:
        if self.world is None:  # pragma: no cover - the base class resets first
            raise RuntimeError("no world: call reset() first")
        return self.world

    def _refresh(self) -> None:
        self._admissible = [] if self.world is None else commands.admissible(self.world)
        self._admissible_set = frozenset(self._admissible)

    @property
    def task_types(self) -> tuple[str, ...]:
        """The task types this env draws from (canonical names)."""
        return self.config.task_types

    @staticmethod
    def known_task_types() -> dict[str, str]:
        """Every accepted ``task_types`` entry -> canonical name."""
        return {**{t: t for t in TASK_TYPES}, **TASK_ALIASES}
