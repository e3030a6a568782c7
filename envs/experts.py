"""Expert (privileged) policies for the built-in envs: solvers that read the env's state.

They make demonstrations for warm starts, baselines for benchmarks and the scripted demo.
An expert is looked up by env class name and called with the unwrapped env; it returns the
next action text (without ``<answer>`` tags), or None when it has no move.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["expert_for", "has_expert", "EXPERTS", "EXPERT_FACTORIES"]

#: env class name -> "module:function(env) -> str | None"
EXPERTS: dict[str, str] = {
    "FrozenLakeEnv": "rockroll.envs.frozenlake.expert:next_action",
    "SokobanEnv": "rockroll.envs.sokoban.expert:next_action",
    "ALFWorldEnv": "rockroll.envs.alfworld.planner:next_action",
}
#: env class name -> "module:factory(env) -> (() -> str | None)" for experts that keep state
#: through an episode (call ``expert_for`` after each reset)
EXPERT_FACTORIES: dict[str, str] = {
    "WebShopEnv": "rockroll.envs.webshop.oracle:expert",
    "SWEEnv": "rockroll.envs.swe.expert:expert",
}


def _load(ref: str) -> Callable[..., Any]:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def has_expert(env: Any) -> bool:
    name = type(getattr(env, "unwrapped", env)).__name__
    return name in EXPERTS or name in EXPERT_FACTORIES


def expert_for(env: Any) -> Callable[[], str | None]:
    """A zero-argument callable giving the expert's next action for ``env``'s current state.

    Call it after ``reset``: stateful experts start their episode here.
    """
    inner = getattr(env, "unwrapped", env)
    name = type(inner).__name__
    if name in EXPERT_FACTORIES:
        return _load(EXPERT_FACTORIES[name])(env)
    if name not in EXPERTS:
        known = ", ".join(sorted({*EXPERTS, *EXPERT_FACTORIES}))
        raise LookupError(f"no expert policy for {name}; experts exist for {known}")
    fn = _load(EXPERTS[name])
    return lambda: fn(inner)
