"""The env registry: ``make``, ``register``, ``spec``, ``list_envs``.

Importing this package registers rockroll's built-in envs, here and in gymnasium as
``rockroll/<id>`` (``gymnasium.make("rockroll/FrozenLake-v0")`` after ``import rockroll.envhub``, or
``gymnasium.make("rockroll.envhub:rockroll/FrozenLake-v0")`` without it).
"""

if __name__ != "rockroll.envhub":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.envhub, not {__name__}: rockroll's packages live in the rockroll namespace")

from rockroll.envhub.builtin import register_builtin_envs
from rockroll.envhub.errors import RegistrationError, RegistryError, UnknownEnvError
from rockroll.envhub.registry import (
    GYM_NAMESPACE,
    EnvSpec,
    deregister,
    list_envs,
    make,
    parse_env_id,
    register,
    spec,
    split_env_id,
)

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
    "split_env_id",
]

register_builtin_envs()
