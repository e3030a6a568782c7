"""Feedback text, worded like ALFWorld's TextWorld grammar.

Lists read "a mug 1, a cup 2, and a apple 1" (ALFWorld always writes "a", and uses ", and "
before the last entry even for two); an empty list reads "nothing".
"""

from __future__ import annotations

from rockroll.envs.alfworld.world import Item, Receptacle, World

__all__ = [
    "WELCOME",
    "NOTHING_HAPPENS",
    "list_things",
    "overview_order",
    "intro",
    "look",
    "inventory",
    "describe_receptacle",
    "examine_item",
    "arrive",
    "opened",
    "closed",
    "picked_up",
    "put",
    "used_appliance",
    "toggled",
]

WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
NOTHING_HAPPENS = "Nothing happens."
_ROOM_NAMES = {"kitchen": "kitchen", "livingroom": "living room", "bedroom": "bedroom", "bathroom": "bathroom"}


def list_things(names: list[str]) -> str:
    """``["mug 1", "apple 2"] -> "a mug 1, and a apple 2"``; ``[] -> "nothing"``."""
    if not names:
        return "nothing"
    parts = [f"a {n}" for n in names]
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + ", and " + parts[-1]


def overview_order(recs: list[Receptacle]) -> list[str]:
    """ALFWorld's listing order: kinds alphabetically, numbers descending."""

    def key(r: Receptacle) -> tuple[str, int]:
        return r.kind, -int(r.name.rsplit(" ", 1)[1])

    return [r.name for r in sorted(recs, key=key)]


def intro(world: World) -> str:
    """The first observation: welcome line, the room overview and the task."""
    return f"{WELCOME}\n\n{look(world)}\n\nYour task is to: {world.task.text}"


def look(world: World) -> str:
    """What ``look`` says: the room overview, or the receptacle faced and what stands next to it."""
    rec = world.location()
    if rec is not None:
        return f"You are facing the {rec.name}. Next to it, you see {list_things(rec.beside)}."
    recs = list(world.receptacles.values())
    if len(world.rooms) == 1:
        return (
            f"You are in the middle of a room. Looking quickly around you, you see {list_things(overview_order(recs))}."
        )
    parts = []
    for i, room in enumerate(world.rooms):
        here = overview_order([r for r in recs if r.room == i])
        parts.append(f"In the {_ROOM_NAMES.get(room, room)}, you see {list_things(here)}.")
    return "You are in the middle of a house. Looking quickly around you: " + " ".join(parts)


def inventory(world: World) -> str:
    """What ``inventory`` says."""
    if world.holding is None:
        return "You are not carrying anything."
    return f"You are carrying: {list_things([world.holding])}."


def describe_receptacle(world: World, rec: Receptacle) -> str:
    """What ``examine <receptacle>`` says (also the tail of ``go to`` and ``open``)."""
    if rec.openable and rec.is_open:
        return f"The {rec.name} is open. In it, you see {list_things(rec.contents)}."
    if rec.openable:
        return f"The {rec.name} is closed."
    return f"On the {rec.name}, you see {list_things(rec.contents)}."


def examine_item(item: Item) -> str:
    """What ``examine <object>`` says."""
    if item.clean and item.hot:
        return f"This is a hot and clean {item.name}."
    if item.clean and item.cool:
        return f"This is a cool and clean {item.name}."
    if item.hot:
        return f"This is a hot {item.name}."
    if item.clean:
        return f"This is a clean {item.name}."
    if item.cool:
        return f"This is a cold {item.name}."
    if not item.portable:
        return f"This {item.name} is {'on' if item.toggled else 'off'}."
    return f"There's nothing special about {item.name}."


def arrive(world: World, rec: Receptacle) -> str:
    """Feedback of ``go to``."""
    return f"You arrive at {rec.name}. {describe_receptacle(world, rec)}"


def opened(world: World, rec: Receptacle) -> str:
    """Feedback of ``open``."""
    return f"You open the {rec.name}. {describe_receptacle(world, rec)}"


def closed(rec: Receptacle) -> str:
    """Feedback of ``close``."""
    return f"You close the {rec.name}."


def picked_up(item: str, rec: str) -> str:
    """Feedback of ``take``."""
    return f"You pick up the {item} from the {rec}."


def put(item: str, rec: str) -> str:
    """Feedback of ``put``."""
    return f"You put the {item} in/on the {rec}."


def used_appliance(verb: str, item: str, rec: str) -> str:
    """Feedback of ``clean``/``heat``/``cool`` (``verb`` is the command word)."""
    return f"You {verb} the {item} using the {rec}."


def toggled(item: Item) -> str:
    """Feedback of ``use <light>``, after the switch."""
    return f"You turn {'on' if item.toggled else 'off'} the {item.name}."
