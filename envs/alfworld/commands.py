"""ALFWorld's text commands: which are admissible in a state, and what they do.

Grammar (names are numbered, e.g. ``mug 1``, ``cabinet 3``)::

    go to <receptacle>          open <receptacle>          close <receptacle>
    take <object> from <receptacle>                         put <object> in/on <receptacle>
    clean <object> with <receptacle>   heat <object> with <receptacle>   cool <object> with <receptacle>
    use <light>                 examine <object or receptacle>           look          inventory

:func:`normalize` folds the variants an agent may write (case, spaces, a final period, ``put X in
Y``, ``put X on Y``, ``move X to Y``) into the canonical form :func:`admissible` lists, and
:func:`execute` applies an admissible command to the world in place.
"""

from __future__ import annotations

import re

from rockroll.envs.alfworld import text
from rockroll.envs.alfworld.catalog import CLEANERS, COOLERS, HEATERS, OBJECT_TYPES
from rockroll.envs.alfworld.world import Item, World

__all__ = ["admissible", "normalize", "execute"]

_SPACES = re.compile(r"\s+")
_PUT = re.compile(r"^(?:put|move|place) (?P<obj>.+?) (?:in/on|in|on|into|onto|to) (?P<rec>.+)$")
_TWO_ARGS = re.compile(r"^(?P<verb>take|clean|heat|cool) (?P<obj>.+?) (?:from|with) (?P<rec>.+)$")
_ABILITY = {"clean": (CLEANERS, "clean"), "heat": (HEATERS, "heat"), "cool": (COOLERS, "cool")}


def normalize(command: str) -> str:
    """Canonical spelling of ``command`` (it may still be inadmissible)."""
    cmd = _SPACES.sub(" ", command.strip().lower()).rstrip(".").strip()
    m = _PUT.match(cmd)
    if m:
        return f"put {m['obj']} in/on {m['rec']}"
    return cmd


def _can(item: Item, verb: str) -> bool:
    spec = OBJECT_TYPES.get(item.kind)
    return spec is not None and bool(getattr(spec, verb))


def admissible(world: World) -> list[str]:
    """The commands that do something in ``world``'s current state (sorted, no duplicates)."""
    cmds = ["look", "inventory"]
    cmds.extend(f"go to {name}" for name in world.receptacles if name != world.at)
    held = world.items[world.holding] if world.holding is not None else None
    if held is not None:
        cmds.append(f"examine {held.name}")
    rec = world.location()
    if rec is not None:
        cmds.append(f"examine {rec.name}")
        if rec.openable:
            cmds.append(f"{'close' if rec.is_open else 'open'} {rec.name}")
        for name in world.visible_items(rec):
            item = world.items[name]
            cmds.append(f"examine {name}")
            if item.portable and held is None:
                cmds.append(f"take {name} from {rec.name}")
            elif not item.portable:
                cmds.append(f"use {name}")
        for name in rec.beside:
            cmds.append(f"examine {name}")
            cmds.append(f"use {name}")
        if held is not None:
            if rec.visible:
                cmds.append(f"put {held.name} in/on {rec.name}")
            for verb, (kinds, ability) in _ABILITY.items():
                if rec.kind in kinds and _can(held, ability):
                    cmds.append(f"{verb} {held.name} with {rec.name}")
    return sorted(set(cmds))


def execute(world: World, command: str) -> tuple[str, bool]:
    """Apply an admissible canonical ``command``; return (feedback, whether the world changed).

    The caller checks admissibility first; an inadmissible command raises ValueError.
    """
    if command == "look":
        return text.look(world), False
    if command == "inventory":
        return text.inventory(world), False
    verb, _, rest = command.partition(" ")
    if verb == "go" and rest.startswith("to "):
        rec = world.receptacles[rest[3:]]
        world.at = rec.name
        return text.arrive(world, rec), True
    if verb in ("open", "close"):
        rec = world.receptacles[rest]
        rec.is_open = verb == "open"
        return (text.opened(world, rec) if rec.is_open else text.closed(rec)), True
    if verb == "examine":
        if rest in world.receptacles:
            return text.describe_receptacle(world, world.receptacles[rest]), False
        return text.examine_item(world.items[rest]), False
    if verb == "use":
        lamp = world.items[rest]
        lamp.toggled = not lamp.toggled
        return text.toggled(lamp), True
    m = _PUT.match(command)
    if m and verb == "put":
        item, rec = world.items[m["obj"]], world.receptacles[m["rec"]]
        item.loc = rec.name
        rec.contents.append(item.name)
        world.holding = None
        return text.put(item.name, rec.name), True
    m = _TWO_ARGS.match(command)
    if m is None:
        raise ValueError(f"not an ALFWorld command: {command!r}")
    item, rec = world.items[m["obj"]], world.receptacles[m["rec"]]
    if verb == "take":
        rec.contents.remove(item.name)
        item.loc = None
        world.holding = item.name
        return text.picked_up(item.name, rec.name), True
    if verb == "clean":
        item.clean = True
    elif verb == "heat":
        item.hot, item.cool = True, False
    else:
        item.cool, item.hot = True, False
    return text.used_appliance(verb, item.name, rec.name), True
