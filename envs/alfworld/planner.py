"""A privileged planner for ``ALFWorld-v0``: reads the world state, returns the commands that solve it.

:func:`next_command` is a goal-directed policy over the full state (it knows where every object
is, closed receptacles included); :func:`plan` runs it on a copy of the world through the same
rules as the env until the goal holds, so every command it returns is admissible when played in
order. It works from any state (mid-episode too): it first puts down an object that does not
serve the task.

Strategy per task: fetch a task object (go, open if closed, take), bring it to the sink /
microwave / fridge when the goal wants it clean / hot / cool, then go to a goal receptacle (open
it if closed) and put it there; for two objects, the second goes to the same receptacle; for the
light task, carry the object to the lamp and switch it on.
"""

from __future__ import annotations

from collections.abc import Callable

from rockroll.envs.alfworld import commands
from rockroll.envs.alfworld.catalog import TASK_APPLIANCES, TASK_PROPERTY
from rockroll.envs.alfworld.tasks import goal_satisfied, satisfies
from rockroll.envs.alfworld.world import Item, Receptacle, World

__all__ = ["next_command", "plan", "next_action", "expert", "world_of"]

MAX_PLAN = 100


def world_of(source: object) -> World:
    """A :class:`World` from a World, an env (wrapped or not), ``env.get_state()`` or its ``data``."""
    if isinstance(source, World):
        return source
    world = getattr(getattr(source, "unwrapped", source), "world", None)
    if isinstance(world, World):
        return world
    if isinstance(source, dict):
        data = source
        for key in ("env", "data", "world"):  # MaxSteps snapshot -> env snapshot -> env data -> world
            if key in data and isinstance(data[key], dict):
                data = data[key]
        return World.from_dict(data)
    raise TypeError(f"cannot read an ALFWorld world from {type(source).__name__}")


def _go_or(world: World, rec: Receptacle, then: str) -> str:
    """Go to ``rec`` unless already there; once there, open it if needed, else do ``then``."""
    if world.at != rec.name:
        return f"go to {rec.name}"
    if not rec.visible:
        return f"open {rec.name}"
    return then


def _drop(world: World, held: Item) -> str:
    """Put down the held object where the agent is (or at the first receptacle if nowhere)."""
    rec = world.location() or next(iter(world.receptacles.values()))
    return _go_or(world, rec, f"put {held.name} in/on {rec.name}")


def _fetch(world: World, item: Item) -> str:
    rec = world.receptacles[item.loc or ""]
    return _go_or(world, rec, f"take {item.name} from {rec.name}")


def _goal_receptacle(world: World, exclude: set[str]) -> Receptacle:
    """The goal-kind receptacle to fill: the one already holding most task objects, else the first."""
    task = world.task
    recs = [r for r in world.receptacles.values() if r.kind == task.recep]

    def score(rec: Receptacle) -> int:
        return sum(
            1
            for n in rec.contents
            if n not in exclude and world.items[n].kind == task.obj and satisfies(world.items[n], task.type)
        )

    return max(recs, key=score)  # max keeps the first of equals


def _candidates(world: World, skip_in: str | None) -> list[Item]:
    """Portable task objects not already placed in ``skip_in``, nearest first (same place first)."""
    items = [o for o in world.items.values() if o.kind == world.task.obj and o.loc is not None and o.loc != skip_in]
    return sorted(items, key=lambda o: o.loc != world.at)


def _appliance(world: World) -> Receptacle | None:
    kinds = TASK_APPLIANCES[world.task.type]
    if not kinds:
        return None
    recs = [r for r in world.receptacles.values() if r.kind in kinds]
    return next((r for r in recs if r.name == world.at), recs[0] if recs else None)


def next_command(world: World) -> str | None:
    """The next command toward the goal (None when the goal holds or cannot be reached)."""
    if goal_satisfied(world):
        return None
    task = world.task
    held = world.items[world.holding] if world.holding is not None else None
    if task.type == "look_at_obj_in_light":
        if held is not None and held.kind != task.obj:
            return _drop(world, held)
        if held is None:
            targets = _candidates(world, None)
            return _fetch(world, targets[0]) if targets else None
        lamps = [o for o in world.items.values() if o.kind == task.light]
        if not lamps:
            return None
        lamp = next((o for o in lamps if o.loc == world.at), lamps[0])
        host = world.receptacles[lamp.loc or ""]
        return f"go to {host.name}" if world.at != host.name else f"use {lamp.name}"

    goal = _goal_receptacle(world, {world.holding} if world.holding else set())
    if held is not None and held.kind != task.obj:
        return _drop(world, held)
    if held is None:
        targets = _candidates(world, goal.name if task.type == "pick_two_obj_and_place" else None)
        return _fetch(world, targets[0]) if targets else None
    if not satisfies(held, task.type):
        appliance = _appliance(world)
        if appliance is None:
            return None
        verb = {"clean": "clean", "hot": "heat", "cool": "cool"}[TASK_PROPERTY[task.type] or ""]
        return _go_or(world, appliance, f"{verb} {held.name} with {appliance.name}")
    return _go_or(world, goal, f"put {held.name} in/on {goal.name}")


def plan(source: object, max_len: int = MAX_PLAN) -> list[str]:
    """Commands that solve the task from the current state of ``source`` (see :func:`world_of`).

    Raises RuntimeError if the policy gets stuck (a command it chose was not admissible, or no
    progress within ``max_len`` commands): that would be an unsolvable task or a planner bug.
    """
    world = world_of(source).copy()
    out: list[str] = []
    while not goal_satisfied(world):
        cmd = next_command(world)
        if cmd is None or len(out) >= max_len:
            raise RuntimeError(f"planner stuck after {out} on task {world.task.text!r}")
        if cmd not in commands.admissible(world):
            raise RuntimeError(f"planner chose inadmissible {cmd!r} after {out}")
        commands.execute(world, cmd)
        out.append(cmd)
    return out


def next_action(env: object) -> str | None:
    """The planner's next command for ``env``'s state (the ALFWorld-v0 expert wraps it)."""
    return next_command(world_of(env))


def expert(env: object) -> Callable[[], str | None]:
    """The expert factory named on the env's spec (see :mod:`rockroll.envs.experts`)."""
    inner = getattr(env, "unwrapped", env)
    return lambda: next_action(inner)
