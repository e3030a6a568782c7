"""The rollout error model: every stage runs inside a boundary that tags its failures.

Stages: ``sandbox_start`` (opening the env), ``env_reset``, ``env_step``, ``generation``,
``reward``. A failure in a stage is one of:

* **infra** (:class:`InfraFailure`): the platform broke (sandbox lost or timed out, server error,
  engine error, an env that crashed or hung, the per-episode deadline passed). The episode is
  retried from the start on a fresh env while its deadline allows, else masked out of the batch
  and counted in metrics. Never scored as the agent's failure, never a crash of the batch.
* **fatal** (:class:`FatalRolloutError`): the run is misconfigured (unknown env id, invalid env
  kwargs, a 4xx answer of the API other than a lost sandbox or session). Retrying cannot help, so it is
  raised to the caller at once.
* **agent** failures are not exceptions: the env scores invalid actions itself, and running out of
  context ends the episode with a ``FailureTag(kind="agent")`` (see :mod:`rockroll.agentrl.rollout.env_manager`).

Unknown exceptions count as infra: by the text-env contract no agent text can crash an env.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Literal, TypeVar

from rockroll.envhub.errors import RegistrationError, UnknownEnvError
from rockroll.envs.errors import ActionTypeError, EnvConfigError, RockrollError
from rockroll.sandbox.errors import StatusError

__all__ = ["RockrollError", "InfraFailure", "FatalRolloutError", "classify", "boundary", "Stage"]

Stage = Literal["sandbox_start", "env_reset", "env_step", "generation", "reward"]
T = TypeVar("T")


class FatalRolloutError(RockrollError, RuntimeError):
    """A configuration error found during rollout (see the module docstring); fix the config."""

    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(f"{stage}: {type(cause).__name__}: {cause}")
        self.stage = stage
        self.cause = cause


class InfraFailure(RockrollError):
    """An infrastructure failure in one stage of one episode (retry or mask, never score)."""

    def __init__(self, stage: str, cause: BaseException | None, message: str = "") -> None:
        self.stage = stage
        self.cause = cause
        self.error = type(cause).__name__ if cause is not None else "EpisodeDeadline"
        self.message = message or (str(cause) if cause is not None else "")
        super().__init__(f"{stage}: {self.error}: {self.message}")


#: 4xx codes that say the platform lost the episode's session (a replica's reconciliation closed it, its
#: sandbox died), not that the run is misconfigured: a fresh env can succeed
_NOT_CONFIG = ("sandbox_lost", "session_not_found")


def classify(exc: BaseException) -> Literal["infra", "fatal"]:
    """Whether ``exc`` (raised by an env, sandbox, API client or engine) is infra or fatal.

    API client errors are recognised through their sandbox-layer base,
    :class:`~rockroll.sandbox.errors.StatusError`, so this layer needs no import of the API.
    """
    if isinstance(exc, (UnknownEnvError, RegistrationError, EnvConfigError, ActionTypeError)):
        return "fatal"
    if isinstance(exc, StatusError) and isinstance(exc.status, int):
        if 400 <= exc.status < 500 and exc.status not in (408, 409, 410, 429) and exc.code not in _NOT_CONFIG:
            return "fatal"
    return "infra"


async def boundary(stage: str, awaitable: Awaitable[T], timeout_s: float | None) -> T:
    """Await ``awaitable`` within ``timeout_s``; turn failures into tagged errors.

    Raises :class:`InfraFailure` (timeouts included) or :class:`FatalRolloutError`; cancellation
    passes through untouched.
    """
    try:
        if timeout_s is None:
            return await awaitable
        if timeout_s <= 0:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise InfraFailure(stage, None, "the episode deadline passed")
        return await asyncio.wait_for(awaitable, timeout_s)
    except asyncio.CancelledError:
        raise
    except (InfraFailure, FatalRolloutError):
        raise
    except TimeoutError as e:  # asyncio.TimeoutError is TimeoutError since Python 3.11
        raise InfraFailure(stage, e, f"no answer within {timeout_s:.3g}s") from e
    except Exception as e:  # noqa: BLE001 - the boundary's job is to catch everything
        if classify(e) == "fatal":
            raise FatalRolloutError(stage, e) from e
        raise InfraFailure(stage, e) from e
