"""The env registry: ``make``, ``register``, ``spec``, ``list_envs``.

Importing this package registers rockroll's built-in envs, here and in gymnasium as
``rockroll/<id>`` (``gymnasium.make("rockroll/FrozenLake-v0")`` after ``import envhub``, or
``gymnasium.make("envhub:rockroll/FrozenLake-v0")`` without it).
"""

from envhub.builtin import register_builtin_envs
from envhub.errors import RegistrationError, RegistryError, UnknownEnvError
from envhub.registry import GYM_NAMESPACE, EnvSpec, deregister, list_envs, make, parse_env_id, register, spec

__all__ = [
    "GYM_NAMESPACE",
    "EnvSpec",
    "RegistrationError",
    "RegistryError",
    "UnknownEnvError",
    "deregister",
    "list_envs",
    "make",
    "parse_env_id",
    "register",
    "spec",
]

register_builtin_envs()
