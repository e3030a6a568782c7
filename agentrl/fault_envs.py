"""Imported by the in-sandbox server (``ROCKROLL_ENV_MODULES=rockroll.agentrl.fault_envs``): registers the
fault-injection envs listed in ``$ROCKROLL_FAULT_ENVS`` (JSON ``{env_id: FaultyEnv kwargs}``).

Only for tests and benches of the rollout error model; see :mod:`rockroll.agentrl.faults`.
"""

from __future__ import annotations

from rockroll.agentrl.faults import register_from_environ

__all__ = ["REGISTERED"]

REGISTERED = register_from_environ()
