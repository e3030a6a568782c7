"""The six ALFWorld task types: goal sentences and goal checks (pure functions of a world).

* ``pick_and_place_simple``: some ``obj`` is in/on a receptacle of kind ``recep``.
* ``look_at_obj_in_light``: the agent holds some ``obj`` at the place of a switched-on ``light``.
* ``pick_clean_then_place_in_recep`` / ``..._heat_...`` / ``..._cool_...``: a clean / hot / cool
  ``obj`` is in/on a receptacle of kind ``recep``.
* ``pick_two_obj_and_place``: two ``obj`` are in/on the same receptacle of kind ``recep``.
"""

from __future__ import annotations

from rockroll.envs.alfworld.catalog import TASK_ALIASES, TASK_PROPERTY, TASK_TEMPLATES, TASK_TYPES
from rockroll.envs.alfworld.world import Item, World

__all__ = ["goal_text", "goal_satisfied", "satisfies", "resolve_task_types"]


def goal_text(task_type: str, obj: str, recep: str | None, light: str | None, template: int = 0) -> str:
    """The goal sentence of a task, from template number ``template`` (modulo their count)."""
    templates = TASK_TEMPLATES[task_type]
    return templates[template % len(templates)].format(obj=obj, recep=recep, light=light)


def satisfies(item: Item, task_type: str) -> bool:
    """Whether ``item``'s state is what ``task_type`` asks for (its kind is not checked)."""
    prop = TASK_PROPERTY[task_type]
    return prop is None or bool(getattr(item, prop))


def goal_satisfied(world: World) -> bool:
    """Whether the world's task is done."""
    task = world.task
    if task.type == "look_at_obj_in_light":
        if world.holding is None or world.at is None or world.items[world.holding].kind != task.obj:
            return False
        rec = world.receptacles[world.at]
        return any(world.items[n].kind == task.light and world.items[n].toggled for n in (*rec.contents, *rec.beside))
    need = 2 if task.type == "pick_two_obj_and_place" else 1
    for rec in world.receptacles.values():
        if rec.kind != task.recep:
            continue
        count = sum(1 for n in rec.contents if world.items[n].kind == task.obj and satisfies(world.items[n], task.type))
        if count >= need:
            return True
    return False


def resolve_task_types(task_types: object) -> tuple[str, ...]:
    """Validate the ``task_types`` kwarg: None (all six) or a non-empty list of names or aliases.

    Returns the canonical names in ALFWorld's order; raises ValueError naming the bad entry.
    """
    if task_types is None:
        return TASK_TYPES
    if isinstance(task_types, str) or not isinstance(task_types, (list, tuple, set, frozenset)) or not task_types:
        raise ValueError(f"task_types must be a non-empty list of task type names, got {task_types!r}")
    chosen = set()
    for name in task_types:
        canonical = TASK_ALIASES.get(name, name) if isinstance(name, str) else None
        if canonical not in TASK_TYPES:
            raise ValueError(
                f"unknown task type {name!r}; choose from {', '.join(TASK_TYPES)} "
                f"(or the short names {', '.join(TASK_ALIASES)})"
            )
        chosen.add(canonical)
    return tuple(t for t in TASK_TYPES if t in chosen)
