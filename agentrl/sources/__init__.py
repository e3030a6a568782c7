"""Env sources: where the rollout gets its envs, and the batched env calls it makes on them.

``base`` holds the contract (:class:`EnvSource`, :data:`EnvCall`); ``kinds`` the in-process and
callable sources and the registry of source kinds (:func:`open_source`); ``sandbox``, ``remote`` and
``openenv`` the sources over sandbox sessions, the control plane's HTTP API and an OpenEnv server;
``calls`` runs many episodes' resets and steps together in worker threads.

The names below load on first use, so ``import rockroll.agentrl.sources.base`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rockroll.agentrl._lazy import lazy_exports

if TYPE_CHECKING:
    from rockroll.agentrl.sources.calls import EnvCalls
    from rockroll.agentrl.sources.kinds import (
        SOURCE_KINDS,
        CallableSource,
        EnvCall,
        EnvSource,
        LocalSource,
        ResetArg,
        SandboxSource,
        SourceOpener,
        SourceSettings,
        open_source,
        register_source_kind,
        reset_kwargs,
    )

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
    "EnvCalls",
]

#: name -> the module that defines it, imported the first time the name is asked for
_LAZY = {
    "EnvCall": "rockroll.agentrl.sources.kinds",
    "EnvSource": "rockroll.agentrl.sources.kinds",
    "ResetArg": "rockroll.agentrl.sources.kinds",
    "SourceSettings": "rockroll.agentrl.sources.kinds",
    "LocalSource": "rockroll.agentrl.sources.kinds",
    "SandboxSource": "rockroll.agentrl.sources.kinds",
    "CallableSource": "rockroll.agentrl.sources.kinds",
    "SOURCE_KINDS": "rockroll.agentrl.sources.kinds",
    "SourceOpener": "rockroll.agentrl.sources.kinds",
    "register_source_kind": "rockroll.agentrl.sources.kinds",
    "open_source": "rockroll.agentrl.sources.kinds",
    "reset_kwargs": "rockroll.agentrl.sources.kinds",
    "EnvCalls": "rockroll.agentrl.sources.calls",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
