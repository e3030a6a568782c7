"""The SWE experts: apply the task's reference fix file by file, then submit.

:func:`expert` plays SWE-v0's text form (``edit:`` answers); :func:`tool_expert` plays ``SWETools-v0``
(per file of the fix, a ``str_replace_editor`` view of it, then the edit that reproduces the fix; then
a ``submit`` call).
"""

from __future__ import annotations

from collections.abc import Callable

from rockroll.envs.errors import ResetNeeded
from rockroll.envs.experts import unwrapped_as
from rockroll.envs.swe.env import SWEEnv, reference_actions
from rockroll.envs.swe.tool_env import SWEToolEnv, reference_calls
from rockroll.envs.tools import ToolAction, ToolCall

__all__ = ["expert", "tool_expert"]


def expert(env: object) -> Callable[[], str]:
    """A next-action function for the episode ``env`` has just reset to."""
    task = unwrapped_as(env, SWEEnv).task
    if task is None:
        raise ResetNeeded("the SWE expert starts after reset()")
    plan = reference_actions(task) + ["submit"]
    return lambda: plan.pop(0) if plan else "submit"


def tool_expert(env: object) -> Callable[[], ToolAction]:
    """A next-turn function (one call per turn) for the episode a ``SWETools-v0`` env has just reset to."""
    task = unwrapped_as(env, SWEToolEnv).task
    if task is None:
        raise ResetNeeded("the SWE tool expert starts after reset()")
    plan = [ToolAction("", (call,)) for call in reference_calls(task, view=True)]
    plan.append(ToolAction("", (ToolCall("submit", "submit", {}),)))
    last = plan[-1]
    return lambda: plan.pop(0) if plan else last
