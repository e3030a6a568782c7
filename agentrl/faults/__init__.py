"""Fault injection for tests and benches: envs that are slow, hang or die, and latency distributions.

``envs`` (:class:`FaultyEnv` and its registration; this package was that module, so it re-exports its
names), ``sandbox_envs`` (imported by the in-sandbox server through ``ROCKROLL_ENV_MODULES``: registers
``$ROCKROLL_FAULT_ENVS``), ``latency`` (:class:`Latency`, also for stand-in engines).

The names below load on first use, so ``import rockroll.agentrl.faults.latency`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rockroll.agentrl._lazy import lazy_exports

if TYPE_CHECKING:
    from rockroll.agentrl.faults.envs import (
        FAULT_ENVS_VAR,
        FAULT_MODES,
        FaultyEnv,
        InjectedFault,
        register_fault_env,
        register_from_environ,
    )
    from rockroll.agentrl.faults.latency import Latency, LatencyKind

__all__ = [
    "FaultyEnv",
    "InjectedFault",
    "register_fault_env",
    "register_from_environ",
    "FAULT_MODES",
    "FAULT_ENVS_VAR",
    "Latency",
    "LatencyKind",
]

#: name -> the module that defines it, imported the first time the name is asked for
_LAZY = {
    "FaultyEnv": "rockroll.agentrl.faults.envs",
    "InjectedFault": "rockroll.agentrl.faults.envs",
    "register_fault_env": "rockroll.agentrl.faults.envs",
    "register_from_environ": "rockroll.agentrl.faults.envs",
    "FAULT_MODES": "rockroll.agentrl.faults.envs",
    "FAULT_ENVS_VAR": "rockroll.agentrl.faults.envs",
    "Latency": "rockroll.agentrl.faults.latency",
    "LatencyKind": "rockroll.agentrl.faults.latency",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
