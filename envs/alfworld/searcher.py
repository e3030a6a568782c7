"""A searching expert for ``ALFWorld-v0``: it acts only on what the agent has seen.

The planner (:mod:`rockroll.envs.alfworld.planner`) knows where every object is, closed
receptacles included, so its first move already walks to the hidden mug. A policy that imitates
it learns to guess. This expert keeps the agent's knowledge instead: the receptacles it has seen
into (arrived at while open, or opened) and the lamps it has looked at. It follows the planner on
a copy of the world that holds only the task objects and lights seen so far; while that copy has
nothing to fetch, it searches:

* at a closed receptacle it has not seen into: ``open`` it;
* looking for a floor lamp at a receptacle one may stand next to: ``look`` (only ``look`` tells
  what stands beside a receptacle);
* else ``go to`` the next receptacle not yet seen, the kinds where the thing is usually found
  first (the catalogue's places: public knowledge, as a person's), in the order the room's
  overview lists them.

Every choice is a function of the conversation so far, so a policy with the whole history in its
prompt can imitate it exactly. Use it as the demonstrator of a warm start
(``rollout.expert: rockroll.envs.alfworld.searcher:expert``).
"""

from __future__ import annotations

from collections.abc import Callable

from rockroll.envs.alfworld.catalog import LIGHT_HOSTS, OBJECT_TYPES
from rockroll.envs.alfworld.planner import next_command, world_of
from rockroll.envs.alfworld.tasks import goal_satisfied
from rockroll.envs.alfworld.text import overview_order
from rockroll.envs.alfworld.world import World

__all__ = ["Searcher", "expert"]


class Searcher:
    """The searching expert of one episode (make a new one after every reset)."""

    def __init__(self, env: object) -> None:
        self.env = getattr(env, "unwrapped", env)
        self.seen: set[str] = set()  # receptacles whose contents the agent has seen
        self.looked: set[str] = set()  # receptacles whose neighbours the agent has seen (``look``)
        self.last: str | None = None

    def __call__(self) -> str | None:
        world = world_of(self.env)
        self._observe(world)
        if goal_satisfied(world):
            return None
        cmd = next_command(self._belief(world))
        if cmd is None:
            cmd = self._search(world)
        self.last = cmd
        return cmd

    def _observe(self, world: World) -> None:
        rec = world.location()
        if rec is not None and rec.visible:
            self.seen.add(rec.name)
        if rec is not None and self.last == "look":
            self.looked.add(rec.name)

    def _known(self, world: World, name: str) -> bool:
        item = world.items[name]
        if item.loc is None:
            return True
        rec = world.receptacles[item.loc]
        return (name in rec.contents and item.loc in self.seen) or (name in rec.beside and item.loc in self.looked)

    def _belief(self, world: World) -> World:
        """A copy of ``world`` without the task objects and lights the agent has not seen."""
        task = world.task
        hidden = {n for n, it in world.items.items() if it.kind in (task.obj, task.light) and not self._known(world, n)}
        belief = world.copy()
        for name in hidden:
            del belief.items[name]
        for rec in belief.receptacles.values():
            rec.contents = [n for n in rec.contents if n not in hidden]
            rec.beside = [n for n in rec.beside if n not in hidden]
        return belief

    def _search(self, world: World) -> str | None:
        task = world.task
        held = world.items[world.holding] if world.holding is not None else None
        want_light = task.type == "look_at_obj_in_light" and held is not None and held.kind == task.obj
        places = set(LIGHT_HOSTS.get(task.light or "", ())) if want_light else set(OBJECT_TYPES[task.obj].places)
        here = world.location()
        if here is not None and here.name not in self.seen and not here.visible:
            return f"open {here.name}"
        if want_light and here is not None and here.kind in places and here.name not in self.looked:
            return "look"
        order = overview_order(list(world.receptacles.values()))
        rank = {name: i for i, name in enumerate(order)}
        todo = [
            r
            for r in world.receptacles.values()
            if r.name != world.at
            and (r.name not in self.seen or (want_light and r.kind in places and r.name not in self.looked))
        ]
        if not todo:
            return None
        best = min(todo, key=lambda r: (r.kind not in places, rank[r.name]))
        return f"go to {best.name}"


def expert(env: object) -> Callable[[], str | None]:
    """The expert factory (see :mod:`rockroll.envs.experts`): call it after each reset."""
    return Searcher(env)
