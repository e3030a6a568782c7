"""Expert (privileged) policies for the built-in envs: solvers that read the env's state.

They make demonstrations for warm starts, baselines for benchmarks and the scripted demo.
An expert is looked up by env class name and called with the unwrapped env; it returns the
next action text (without ``<answer>`` tags), or None when it has no move.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["expert_for", "has_expert", "EXPERTS"]

#: env class name -> "module:function(env) -> str | None"
EXPERTS: dict[str, str] = {
    "FrozenLakeEnv": "envs.frozenlake.expert:next_action",
    "SokobanEnv": "envs.sokoban.expert:next_action",
    "ALFWorldEnv": "envs.alfworld.planner:next_action",
}


def has_expert(env: Any) -> bool:
    return type(getattr(env, "unwrapped", env)).__name__ in EXPERTS


def expert_for(env: Any) -> Callable[[], str | None]:
    """A zero-argument callable giving the expert's next action for ``env``'s current state."""
    inner = getattr(env, "unwrapped", env)
    name = type(inner).__name__
    if name not in EXPERTS:
        raise LookupError(f"no expert policy for {name}; experts exist for {', '.join(sorted(EXPERTS))}")
    module, _, attr = EXPERTS[name].partition(":")
    fn = getattr(importlib.import_module(module), attr)
    return lambda: fn(inner)
