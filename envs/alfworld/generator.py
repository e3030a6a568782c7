"""Procedural ALFWorld-style households, drawn only from a ``numpy.random.Generator``.

Order of draws (so one seed gives one household): the task type; the rooms (one that can host
the task, then others); each room's receptacles; its light; the task's object type, goal
receptacle kind and light; the task objects; the distractor objects; object numbers; the
order of each receptacle's contents; the goal phrasing.

Every generated task is solvable: the task objects start outside every receptacle of the goal
kind, openable receptacles can always be opened, and the appliance (sink, microwave, fridge) or
light the task needs is in the household (the tests solve 500 seeds with :mod:`rockroll.envs.alfworld.planner`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from rockroll.envs.alfworld.catalog import (
    LIGHT_HOSTS,
    OBJECT_TYPES,
    OPENABLE,
    ROOM_TYPES,
    TASK_APPLIANCES,
    TASK_ROOMS,
    TASK_TEMPLATES,
    TASK_TYPES,
    RoomType,
)
from rockroll.envs.alfworld.tasks import goal_text
from rockroll.envs.alfworld.world import Item, Receptacle, Task, World

__all__ = ["GenConfig", "generate", "MAX_ROOMS"]

MAX_ROOMS = len(ROOM_TYPES)
T = TypeVar("T")
_ABILITY = {
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
}


@dataclass(frozen=True)
class GenConfig:
    """How households are drawn.

    Attributes:
        task_types: task types to draw from (uniformly).
        num_rooms: rooms in the household (1 to 4, each of a different type; ALFWorld has 1).
        num_receptacles: receptacles per room (None: a room-type dependent random number).
        num_distractors: objects per room besides the task's (None: random, 8 to 20).
    """

    task_types: tuple[str, ...] = TASK_TYPES
    num_rooms: int = 1
    num_receptacles: int | None = None
    num_distractors: int | None = None


def _pick(rng: np.random.Generator, seq: Sequence[T]) -> T:
    return seq[int(rng.integers(len(seq)))]


def _room_kinds(rng: np.random.Generator, room: RoomType, size: int | None) -> list[str]:
    """Receptacle kinds (with repeats) of one room."""
    kinds = list(room.required)
    target = size if size is not None else int(rng.integers(room.size[0], room.size[1] + 1))
    caps = dict(room.optional)
    while len(kinds) < target:
        open_kinds = [k for k, c in caps.items() if c > 0]
        if not open_kinds:
            break
        kind = _pick(rng, open_kinds)
        caps[kind] -= 1
        kinds.append(kind)
    return sorted(kinds)


def _task_choice(
    rng: np.random.Generator, task_type: str, room: RoomType, present: set[str]
) -> tuple[str, str | None, list[str]] | None:
    """(object type, goal receptacle kind, kinds the task objects may start in), or None."""
    ability = _ABILITY.get(task_type)
    candidates = [o for o in room.objects if ability is None or getattr(OBJECT_TYPES[o], ability)]
    appliances = TASK_APPLIANCES[task_type] or frozenset()
    for i in rng.permutation(len(candidates)):
        obj = OBJECT_TYPES[candidates[int(i)]]
        places = [k for k in obj.places if k in present]
        if task_type == "look_at_obj_in_light":
            if places:
                return obj.name, None, places
            continue
        goals = [k for k in places if k not in appliances and any(p != k for p in places)]
        if goals:
            goal = _pick(rng, goals)
            return obj.name, goal, [p for p in places if p != goal]
    return None


def generate(rng: np.random.Generator, config: GenConfig) -> World:
    """Draw a household and a solvable task from ``rng``."""
    task_type = _pick(rng, config.task_types)
    for _ in range(100):
        world = _try_generate(rng, config, task_type)
        if world is not None:
            return world
    raise RuntimeError(f"could not generate a {task_type} task with {config}")  # pragma: no cover


def _try_generate(rng: np.random.Generator, config: GenConfig, task_type: str) -> World | None:
    primary = _pick(rng, TASK_ROOMS[task_type])
    others = [r for r in ROOM_TYPES if r != primary]
    extra = [others[int(i)] for i in rng.permutation(len(others))[: config.num_rooms - 1]]
    rooms = [primary, *extra]
    rooms = [rooms[int(i)] for i in rng.permutation(len(rooms))]

    # receptacles, numbered per kind across the house
    receptacles: dict[str, Receptacle] = {}
    numbers: dict[str, int] = {}
    for ri, room in enumerate(rooms):
        for kind in _room_kinds(rng, ROOM_TYPES[room], config.num_receptacles):
            numbers[kind] = numbers.get(kind, 0) + 1
            name = f"{kind} {numbers[kind]}"
            openable = kind in OPENABLE
            receptacles[name] = Receptacle(name, kind, ri, openable=openable, is_open=not openable)
    present = {r.kind for r in receptacles.values()}

    # lights: one per room that has them
    lights: list[tuple[str, Receptacle]] = []
    for ri, room in enumerate(rooms):
        options = ROOM_TYPES[room].lights
        if not options:
            continue
        light = _pick(rng, options)
        hosts = [r for r in receptacles.values() if r.room == ri and r.kind in LIGHT_HOSTS[light]]
        if hosts:
            lights.append((light, _pick(rng, hosts)))

    choice = _task_choice(rng, task_type, ROOM_TYPES[primary], present)
    if choice is None or (task_type == "look_at_obj_in_light" and not lights):
        return None
    obj, goal_kind, start_kinds = choice
    light_kind = _pick(rng, [k for k, _ in lights]) if task_type == "look_at_obj_in_light" else None

    # objects: (kind, receptacle) pairs, task objects first
    spawns: list[tuple[str, Receptacle]] = []
    starts = [r for r in receptacles.values() if r.kind in start_kinds]
    low = 2 if task_type == "pick_two_obj_and_place" else 1
    for _ in range(int(rng.integers(low, 4))):
        spawns.append((obj, _pick(rng, starts)))
    for ri, room in enumerate(rooms):
        here = [r for r in receptacles.values() if r.room == ri]
        here_kinds = {r.kind for r in here}
        kinds = [o for o in ROOM_TYPES[room].objects if o != obj and here_kinds.intersection(OBJECT_TYPES[o].places)]
        count = config.num_distractors if config.num_distractors is not None else int(rng.integers(8, 21))
        for _ in range(count if kinds else 0):
            kind = _pick(rng, kinds)
            spawns.append((kind, _pick(rng, [r for r in here if r.kind in OBJECT_TYPES[kind].places])))

    items = _place(rng, spawns, lights)
    for rec in receptacles.values():
        if len(rec.contents) > 1:
            rec.contents = [rec.contents[int(i)] for i in rng.permutation(len(rec.contents))]
    template = int(rng.integers(len(TASK_TEMPLATES[task_type])))
    task = Task(task_type, obj, goal_kind, light_kind, goal_text(task_type, obj, goal_kind, light_kind, template))
    return World(rooms=rooms, receptacles=receptacles, items=items, task=task)


def _place(
    rng: np.random.Generator, spawns: list[tuple[str, Receptacle]], lights: list[tuple[str, Receptacle]]
) -> dict[str, Item]:
    """Number the objects (in a random order per kind) and put them in their receptacles."""
    by_kind: dict[str, list[Receptacle]] = {}
    for kind, rec in spawns:
        by_kind.setdefault(kind, []).append(rec)
    items: dict[str, Item] = {}
    for kind, recs in by_kind.items():
        for number, rec in zip(rng.permutation(len(recs)) + 1, recs, strict=True):
            name = f"{kind} {int(number)}"
            items[name] = Item(name, kind, rec.name)
            rec.contents.append(name)
    counts: dict[str, int] = {}
    for light, rec in lights:
        counts[light] = counts.get(light, 0) + 1
        name = f"{light} {counts[light]}"
        items[name] = Item(name, light, rec.name, portable=False)
        (rec.contents if light == "desklamp" else rec.beside).append(name)
    return items
