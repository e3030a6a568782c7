"""Imported by the in-sandbox server (``ROCKROLL_ENV_MODULES=rockroll.agentrl.faults.sandbox_envs``): registers the
fault-injection envs listed in ``$ROCKROLL_FAULT_ENVS`` (JSON ``{env_id: FaultyEnv kwargs}``).

Only for tests and benches of the rollout error model; see :mod:`rockroll.agentrl.faults.envs`.
"""

from __future__ import annotations

from rockroll.agentrl.faults.envs import register_from_environ

__all__ = ["REGISTERED"]

REGISTERED = register_from_environ()
