"""The world state of an ALFWorld-style household: receptacles, objects, the agent, the task.

A :class:`World` is plain data that round-trips through JSON (:meth:`World.to_dict` /
:meth:`World.from_dict`); game rules live in :mod:`rockroll.envs.alfworld.commands` and
:mod:`rockroll.envs.alfworld.tasks`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Receptacle", "Item", "Task", "World", "kind_of"]


def kind_of(name: str) -> str:
    """The kind of a numbered name: ``kind_of("cabinet 3") == "cabinet"``."""
    return name.rsplit(" ", 1)[0]


@dataclass
class Receptacle:
    """A place the agent can go to, e.g. ``countertop 1``.

    Attributes:
        name: numbered name (``"fridge 1"``).
        kind: receptacle kind (``"fridge"``).
        room: index of its room in :attr:`World.rooms`.
        openable: whether it has a door (contents hidden while closed).
        is_open: whether the door is open (always True for a receptacle without one).
        contents: names of the objects in/on it, in the order they are listed.
        beside: names of objects standing next to it (floor lamps).
    """

    name: str
    kind: str
    room: int
    openable: bool = False
    is_open: bool = True
    contents: list[str] = field(default_factory=list)
    beside: list[str] = field(default_factory=list)

    @property
    def visible(self) -> bool:
        """Whether its contents can be seen (and taken)."""
        return self.is_open or not self.openable


@dataclass
class Item:
    """An object, e.g. ``mug 2``.

    Attributes:
        name: numbered name.
        kind: object type (``"mug"``) or light type (``"desklamp"``).
        loc: the receptacle it is in/on/next to; None while the agent holds it.
        portable: whether it can be taken (lights cannot).
        clean, hot, cool: its state (set by ``clean``/``heat``/``cool``).
        toggled: whether a light is switched on.
    """

    name: str
    kind: str
    loc: str | None
    portable: bool = True
    clean: bool = False
    hot: bool = False
    cool: bool = False
    toggled: bool = False


@dataclass
class Task:
    """The episode's goal.

    Attributes:
        type: one of :data:`rockroll.envs.alfworld.catalog.TASK_TYPES`.
        obj: the object type to handle.
        recep: the receptacle kind to put it in (None for the examine-in-light task).
        light: the light type to examine it under (only for that task).
        text: the goal sentence (``"put a clean mug in coffeemachine."``).
    """

    type: str
    obj: str
    recep: str | None
    light: str | None
    text: str


@dataclass
class World:
    """A household and the agent in it.

    Attributes:
        rooms: room type of each room.
        receptacles: name -> receptacle, in a stable order.
        items: name -> object, in a stable order.
        task: the goal.
        at: the receptacle the agent stands at (None: the middle of the room, at the start).
        holding: the object the agent carries (it carries at most one).
    """

    rooms: list[str]
    receptacles: dict[str, Receptacle]
    items: dict[str, Item]
    task: Task
    at: str | None = None
    holding: str | None = None

    def location(self) -> Receptacle | None:
        """The receptacle the agent stands at."""
        return None if self.at is None else self.receptacles[self.at]

    def visible_items(self, recep: Receptacle) -> list[str]:
        """Objects the agent sees in/on ``recep`` (nothing while it is closed)."""
        return list(recep.contents) if recep.visible else []

    def of_kind(self, kind: str) -> list[Receptacle]:
        """Receptacles of ``kind``, in order."""
        return [r for r in self.receptacles.values() if r.kind == kind]

    def items_of_kind(self, kind: str) -> list[Item]:
        """Objects of ``kind``, in order."""
        return [o for o in self.items.values() if o.kind == kind]

    def copy(self) -> World:
        """An independent deep copy."""
        return World.from_dict(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (lists keep the order of receptacles and objects)."""
        return {
            "rooms": list(self.rooms),
            "receptacles": [asdict(r) for r in self.receptacles.values()],
            "items": [asdict(o) for o in self.items.values()],
            "task": asdict(self.task),
            "at": self.at,
            "holding": self.holding,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> World:
        """Rebuild a world from :meth:`to_dict` output; raises KeyError/TypeError/ValueError if malformed."""
        receptacles = {}
        for r in data["receptacles"]:
            rec = Receptacle(
                name=str(r["name"]),
                kind=str(r["kind"]),
                room=int(r["room"]),
                openable=bool(r["openable"]),
                is_open=bool(r["is_open"]),
                contents=[str(n) for n in r["contents"]],
                beside=[str(n) for n in r["beside"]],
            )
            receptacles[rec.name] = rec
        items = {}
        for o in data["items"]:
            item = Item(
                name=str(o["name"]),
                kind=str(o["kind"]),
                loc=None if o["loc"] is None else str(o["loc"]),
                portable=bool(o["portable"]),
                clean=bool(o["clean"]),
                hot=bool(o["hot"]),
                cool=bool(o["cool"]),
                toggled=bool(o["toggled"]),
            )
            items[item.name] = item
        t = data["task"]
        recep, light = (None if t[k] is None else str(t[k]) for k in ("recep", "light"))
        task = Task(str(t["type"]), str(t["obj"]), recep, light, str(t["text"]))
        world = cls([str(r) for r in data["rooms"]], receptacles, items, task, data["at"], data["holding"])
        world.validate()
        return world

    def validate(self) -> None:
        """Check internal consistency; raises ValueError naming the first problem."""
        for name in (*self.receptacles, *self.items):
            if not name.rpartition(" ")[2].isdigit():
                raise ValueError(f"name {name!r} does not end with a number")
        if self.at is not None and self.at not in self.receptacles:
            raise ValueError(f"agent at unknown receptacle {self.at!r}")
        if self.holding is not None and (self.holding not in self.items or self.items[self.holding].loc is not None):
            raise ValueError(f"agent holds unknown or placed object {self.holding!r}")
        for item in self.items.values():
            if item.loc is None:
                if item.name != self.holding:
                    raise ValueError(f"object {item.name!r} is nowhere")
                continue
            rec = self.receptacles.get(item.loc)
            if rec is None or (item.name not in rec.contents and item.name not in rec.beside):
                raise ValueError(f"object {item.name!r} is not listed at {item.loc!r}")
        for rec in self.receptacles.values():
            for name in (*rec.contents, *rec.beside):
                if name not in self.items or self.items[name].loc != rec.name:
                    raise ValueError(f"{rec.name!r} lists {name!r}, which is elsewhere")
