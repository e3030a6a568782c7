"""Env sources: where env managers get their envs (in-process, sandbox session, or the HTTP API).

An :class:`EnvSource` opens one env for one episode attempt and takes it back afterwards. All
sources hand out objects with the text-env contract (``reset``, ``step``, ``close``,
``system_prompt``), so env managers run the same code against each:

* :class:`LocalSource`: ``envhub.make`` in this process.
* :class:`SandboxSource`: ``SandboxManager.open_session`` (warm sandboxes are reused: the manager
  places each session on the least-loaded ready sandbox).
* :class:`CallableSource`: any ``open(env_id, kwargs)`` function (e.g. a job context's placement).
* ``RemoteSource`` (:mod:`rockroll.agentrl.sources.remote`, beside ``RemoteEnv``): sessions of the
  control plane over its HTTP API. It lives in the API layer, above this one.

``open``/``close`` block; env managers call them in a thread pool. ``close`` never raises, and
``open_count`` says how many envs are out (the leak check of tests and benches).

Batched calls: env managers hand the resets and steps made at the same moment to
:meth:`EnvSource.call_batch` together, grouped by :meth:`EnvSource.batch_key`. :class:`LocalSource`
runs a batch one call after another in one worker thread (a thread hand-off per call costs more
than a FrozenLake step); :class:`SandboxSource` sends the calls for the sessions of one sandbox in
one round trip (``env.batch`` of the in-sandbox server, :func:`rockroll.sandbox.session.run_batch`)
instead of one round trip per session. Other sources (key None) get one worker call per env call,
as before. Each call's answer or exception comes back on its own.

Source kinds (what ``source.kind`` of an eval config names) are a registry, like the engines:
:data:`SOURCE_KINDS` maps a kind to an opener, ``opener(config)`` a context manager yielding a
source and closing whatever it started; :func:`open_source` picks one. ``local`` and ``sandbox``
are registered here, ``remote`` as a lazy entry of :mod:`rockroll.agentrl.sources.remote` (imported the
first time it is asked for, so httpx loads only then). Adding a kind is one opener plus
:func:`register_source_kind`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from contextlib import AbstractContextManager

import rockroll.envhub as envhub
from rockroll.agentrl.sources.base import EnvCall, EnvSource, ResetArg, SourceSettings, reset_kwargs
from rockroll.agentrl.sources.sandbox import SandboxSource, open_sandbox_source
from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.registries import Registry

__all__ = [
    "EnvCall",
    "EnvSource",
    "ResetArg",
    "SourceSettings",
    "LocalSource",
    "SandboxSource",
    "CallableSource",
    "SOURCE_KINDS",
    "SourceOpener",
    "register_source_kind",
    "open_source",
    "reset_kwargs",
]


class LocalSource(EnvSource):
    """Envs built in this process with ``envhub.make``; their calls run one after another in one
    worker thread per batch (a slow one gets help, see :mod:`rockroll.agentrl.rollout.env_manager`)."""

    name = "local"

    def _open(self, env_id: str, kwargs: dict[str, object]) -> TextEnvProtocol:
        return envhub.make(env_id, **kwargs)

    def batch_key(self, env: TextEnvProtocol) -> Hashable | None:
        return self.name


class CallableSource(EnvSource):
    """Envs from a function ``open_fn(env_id, kwargs)`` (closed with their own ``close``)."""

    name = "callable"

    def __init__(
        self,
        open_fn: Callable[[str, dict[str, object]], TextEnvProtocol],
        check: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.open_fn = open_fn
        self.check = check

    def check_env(self, env_id: str) -> None:
        """``check(env_id)`` when given; else nothing is checked (whoever supplies ``open_fn`` resolves ids:
        a job's envs were resolved for its owner when it was submitted)."""
        if self.check is not None:
            self.check(env_id)

    def _open(self, env_id: str, kwargs: dict[str, object]) -> TextEnvProtocol:
        return self.open_fn(env_id, kwargs)


# ------------------------------------------------------------------ source kinds
#: ``opener(config)``: a context manager yielding the source ``config`` (an eval ``SourceConfig``) describes
SourceOpener = Callable[[SourceSettings], AbstractContextManager[EnvSource]]
#: source kind -> opener (``remote`` is the lazy entry of :mod:`rockroll.agentrl.sources.remote`)
SOURCE_KINDS: Registry[SourceOpener] = Registry("env source kind", "source.kind")


def register_source_kind(kind: str, opener: SourceOpener) -> None:
    """Make ``open_source(config)`` with ``config.kind == kind`` use ``opener`` (a later one replaces it)."""
    SOURCE_KINDS.add(kind, opener, override=True)


def open_source(config: SourceSettings) -> AbstractContextManager[EnvSource]:
    """The env source ``config`` describes (``config.kind`` picks the opener); closes what it made on exit.

    An unknown kind raises :class:`~rockroll.envs.registries.UnknownNameError` (a ``ValueError``).
    """
    return SOURCE_KINDS.get(config.kind)(config)


@contextlib.contextmanager
def _open_local(config: SourceSettings) -> Iterator[EnvSource]:
    yield LocalSource()


register_source_kind("local", _open_local)
register_source_kind("sandbox", open_sandbox_source)
SOURCE_KINDS.add("remote", "rockroll.agentrl.sources.remote:open_remote_source")
SOURCE_KINDS.add("openenv", "rockroll.agentrl.sources.openenv:open_openenv_source")  # an OpenEnv env server
