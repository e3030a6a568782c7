"""rockroll's text environments and the contract they share (see :mod:`envs.core`)."""

from envs.core import DEFAULT_FORMAT_PENALTY, StepOutcome, TextEnv, TextSpace, parse_answer
from envs.errors import ActionTypeError, EnvConfigError, EnvError, ResetNeeded, StateError
from envs.wrappers import MaxSteps

__all__ = [
    "DEFAULT_FORMAT_PENALTY",
    "ActionTypeError",
    "EnvConfigError",
    "EnvError",
    "MaxSteps",
    "ResetNeeded",
    "StateError",
    "StepOutcome",
    "TextEnv",
    "TextSpace",
    "parse_answer",
]
