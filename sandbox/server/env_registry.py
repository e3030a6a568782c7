"""The env registry as the in-sandbox server sees it: :mod:`rockroll.envhub`, imported on first use.

Importing :mod:`rockroll.envhub` imports gymnasium and numpy and registers the built-in envs: most
of what a server's start-up cost when it happened at start (bench/sandboxes/docker_burst.py). The server's
modules (:mod:`~rockroll.sandbox.server.sessions`, :mod:`~rockroll.sandbox.server.worker_env`,
:mod:`~rockroll.sandbox.server.env_worker`) import this module inside the functions that make envs,
so a server answers ``health`` before any env library is loaded, and the first ``env.make`` (or the
preload of a warm sandbox, ``ROCKROLL_PRELOAD_ENVS``) pays for it once.

Threat model: none of its own (the registry is the server's, see :mod:`rockroll.sandbox.server.sessions`).
"""

from __future__ import annotations

from types import ModuleType

import rockroll.envhub as envhub
import rockroll.envhub.registry as registry
from rockroll.envhub import errors as envhub_errors
from rockroll.envs.wrappers import MaxSteps

__all__ = ["make", "known", "error_modules"]


def make(env_id: str, **kwargs: object) -> MaxSteps:
    """``envhub.make``: the env of ``env_id`` (wrapped in its step limit)."""
    return envhub.make(env_id, **kwargs)


def known(env_id: str) -> bool:
    """Whether the server's registry knows ``env_id`` (looked up through ``registry.spec`` as it is now:
    the plugin loader, :mod:`rockroll.sandbox.server.plugins`, may have replaced it)."""
    try:
        registry.spec(env_id)
    except envhub_errors.UnknownEnvError:
        return False
    return True


def error_modules() -> tuple[ModuleType, ...]:
    """The modules whose exported errors a custom env's worker may answer with (beside ``rockroll.envs.errors``)."""
    return (envhub_errors,)
