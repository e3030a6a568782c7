"""The SWE expert: apply the task's reference fix file by file, then submit."""

from __future__ import annotations

from collections.abc import Callable

from rockroll.envs.errors import ResetNeeded
from rockroll.envs.experts import unwrapped_as
from rockroll.envs.swe.env import SWEEnv, reference_actions

__all__ = ["expert"]


def expert(env: object) -> Callable[[], str]:
    """A next-action function for the episode ``env`` has just reset to."""
    task = unwrapped_as(env, SWEEnv).task
    if task is None:
        raise ResetNeeded("the SWE expert starts after reset()")
    plan = reference_actions(task) + ["submit"]
    return lambda: plan.pop(0) if plan else "submit"
