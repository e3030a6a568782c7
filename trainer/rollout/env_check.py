"""Where a run's envs live, checked before anything is built; replicas of them for the trainer's own looks.

A training run plays each env of ``rollout.env_mix()`` through its env source. Most envs are
registered in this process too (``envhub``: the built-in ones, or one ``envhub.register`` added);
an env registered on a control plane (``alice/Nim-v0``, uploaded through ``POST /v1/envs``) lives only
there, and the trainer reaches it through the source alone: ``rockroll train --url`` (the ``remote``
source, :mod:`rockroll.agentrl.sources.remote`) or a train job (its worker's sessions,
:mod:`rockroll.api.jobs.worker`). Such an env's code never runs in the trainer's process.

:func:`check_train_envs` runs before the model is built: an id that no one knows fails at once (with
the server's "did you mean"), and so does a setting that needs a local copy of an env that has none
(the warm start's expert reads the env's state; plan mode plans on a local copy). :func:`env_replica`
gives the trainer an env to look at (the context check's first observation): a local one when it is
registered here, else a session of the source.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import rockroll.envhub as envhub
from rockroll.agentrl.sources.kinds import EnvSource, LocalSource
from rockroll.envs.config import ConfigError

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig

__all__ = ["registered_here", "check_train_envs", "env_replica"]


def registered_here(env_id: str) -> bool:
    """Whether ``env_id`` is registered in this process (``envhub``), so a local copy of it can be built."""
    try:
        envhub.spec(env_id)
    except (envhub.UnknownEnvError, envhub.RegistrationError):
        return False
    return True


def check_train_envs(cfg: TrainConfig, source: EnvSource | None = None) -> None:
    """Fail before anything is built when an env of the run cannot be played or a setting needs a local copy.

    ``source``: where the run's envs come from (None: this process's registry). Raises
    ``UnknownEnvError`` (a ``LookupError`` with suggestions) for an id the source does not know, and
    :class:`~rockroll.envs.config.ConfigError` naming the key for a setting a source-only env cannot serve.
    """
    source = source or LocalSource()
    for env in cfg.rollout.env_mix():
        if registered_here(env.env_id):
            continue
        source.check_env(env.env_id)
        where = f"{env.env_id} plays only through the {source.name} env source (it is not registered here)"
        if cfg.rollout.mode == "plan":
            raise ConfigError("rollout.mode", f"rollout.mode: plan plans on a local copy of the env; {where}: "
                              "use rollout.mode: multiturn")  # fmt: skip
        if cfg.sft.steps > 0:
            raise ConfigError(
                "sft.steps",
                f"sft.steps > 0 warm-starts on an expert that reads a local copy of the env; {where}: set sft.steps: 0 "
                "(or register the env with its expert in this process: rockroll.envhub.register(..., expert=...))",
            )


@contextlib.contextmanager
def env_replica(env_id: str, kwargs: dict[str, Any], source: EnvSource | None = None) -> Iterator[Any]:
    """An env to look at (reset, render, candidates), closed on exit: built here when ``env_id`` is registered
    here, else a session of ``source`` (given back to it)."""
    if source is None or registered_here(env_id):
        env = envhub.make(env_id, **kwargs)
        try:
            yield env
        finally:
            env.close()
        return
    env = source.open(env_id, kwargs)
    try:
        yield env
    finally:
        source.close(env)
