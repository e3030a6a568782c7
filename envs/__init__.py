"""rockroll's text environments and the contract they share (see :mod:`rockroll.envs.core`)."""

if __name__ != "rockroll.envs":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.envs, not {__name__}: rockroll's packages live in the rockroll namespace")

from rockroll.envs.checker import EnvCheckError, check_env
from rockroll.envs.core import DEFAULT_FORMAT_PENALTY, StepOutcome, TextEnv, TextEnvProtocol, TextSpace, parse_answer
from rockroll.envs.errors import ActionTypeError, EnvConfigError, EnvError, ResetNeeded, RockrollError, StateError
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
