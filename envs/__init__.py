"""rockroll's text environments and the contract they share (see :mod:`rockroll.envs.core`).

The names below load on first use (PEP 562), so importing a light submodule
(``rockroll.envs.agent_identity``, ``rockroll.envs.errors``) does not import numpy and gymnasium:
the in-sandbox server (:mod:`rockroll.sandbox.server`) starts without them and imports an env's
dependencies when its first session opens.
"""

if __name__ != "rockroll.envs":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.envs, not {__name__}: rockroll's packages live in the rockroll namespace")

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rockroll.envs.checker import EnvCheckError, check_env
    from rockroll.envs.core import (
        DEFAULT_FORMAT_PENALTY,
        StepOutcome,
        TextEnv,
        TextEnvProtocol,
        TextSpace,
        parse_answer,
    )
    from rockroll.envs.errors import (
        ActionTypeError,
        EnvConfigError,
        EnvError,
        ResetNeeded,
        RockrollError,
        StateError,
    )
    from rockroll.envs.exec_result import ExecResult
    from rockroll.envs.registries import Registry, UnknownNameError
    from rockroll.envs.wrappers import MaxSteps

__all__ = [
    "DEFAULT_FORMAT_PENALTY",
    "ActionTypeError",
    "EnvCheckError",
    "EnvConfigError",
    "EnvError",
    "ExecResult",
    "MaxSteps",
    "Registry",
    "ResetNeeded",
    "RockrollError",
    "StateError",
    "StepOutcome",
    "TextEnv",
    "TextEnvProtocol",
    "TextSpace",
    "UnknownNameError",
    "check_env",
    "parse_answer",
]

_LAZY = {
    "EnvCheckError": "checker",
    "check_env": "checker",
    "DEFAULT_FORMAT_PENALTY": "core",
    "StepOutcome": "core",
    "TextEnv": "core",
    "TextEnvProtocol": "core",
    "TextSpace": "core",
    "parse_answer": "core",
    "ActionTypeError": "errors",
    "EnvConfigError": "errors",
    "EnvError": "errors",
    "ResetNeeded": "errors",
    "RockrollError": "errors",
    "StateError": "errors",
    "ExecResult": "exec_result",
    "Registry": "registries",
    "UnknownNameError": "registries",
    "MaxSteps": "wrappers",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rockroll.envs.{module}"), name)
    globals()[name] = value  # once: later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
