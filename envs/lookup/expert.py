"""The Lookup expert: ``find`` the person named, ``get`` each record on the question's chain, then ``answer``.

It reads the env's state (the world and which ids were found and fetched), so it picks up from wherever an
episode is: a record the agent fetched already is not fetched again. Its turns are
:class:`~rockroll.envs.tools.ToolAction` (one call each), not answer text: a tool env takes them as they are.
It answers every episode right, in ``difficulty + 2`` turns from the start.
"""

from __future__ import annotations

from collections.abc import Callable

from rockroll.envs.experts import unwrapped_as
from rockroll.envs.lookup.env import LookupEnv
from rockroll.envs.tools import ToolAction, ToolCall

__all__ = ["expert", "next_action"]


def next_action(env: LookupEnv) -> ToolAction | None:
    """The next optimal turn (None: no episode, or the question is answered)."""
    world = env.world
    if world is None or env.final is not None:
        return None
    call_id = f"call{env.calls + 1}"
    chain = world.chain()
    if chain[0] not in env.found and chain[0] not in env.fetched:
        return ToolAction("", (ToolCall(call_id, "find", {"name": world.name}),))
    todo = next((rid for rid in chain if rid not in env.fetched), None)
    if todo is not None:
        return ToolAction("", (ToolCall(call_id, "get", {"id": todo}),))
    return ToolAction("", (ToolCall(call_id, "answer", {"value": int(world.answer())}),))


def expert(env: object) -> Callable[[], ToolAction | None]:
    """The expert factory named on the env's spec (see :mod:`rockroll.envs.experts`)."""
    inner = unwrapped_as(env, LookupEnv)
    return lambda: next_action(inner)
