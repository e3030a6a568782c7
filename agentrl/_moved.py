"""The old flat module paths of agentrl, kept importable for one release (removed in 0.3).

agentrl's modules moved into subpackages by role (``env_source`` is ``sources.kinds``, ``tiny`` is
``models.tiny``, ...: :data:`MOVED`). :class:`MovedModuleFinder`, a meta path finder that
``rockroll.agentrl`` installs, keeps ``import rockroll.agentrl.env_source`` working: it warns
(``DeprecationWarning`` naming the new path) and gives the module at the new path, the very same
object (``sys.modules`` holds it under both names, so its classes stay identical). The old ``faults``
and ``eval`` modules are packages now that re-export their names, so they need no alias.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED", "REMOVED_IN", "MovedModuleFinder", "install"]

REMOVED_IN = "0.3"

_OLD = "rockroll.agentrl."
#: old module name -> its new one (both under ``rockroll.agentrl``)
_RENAMES = {
    "env_source_base": "sources.base",
    "env_source": "sources.kinds",
    "sandbox_source": "sources.sandbox",
    "remote_source": "sources.remote",
    "openenv_source": "sources.openenv",
    "env_calls": "sources.calls",
    "env_manager": "rollout.env_manager",
    "env_handles": "rollout.handles",
    "lockstep": "rollout.lockstep",
    "scheduler": "rollout.scheduler",
    "batch_run": "rollout.batch_run",
    "hedging": "rollout.hedging",
    "deadlines": "rollout.deadlines",
    "gate": "rollout.gate",
    "answers": "rollout.answers",
    "config": "rollout.config",
    "env_mix": "rollout.env_mix",
    "async_rollout": "rollout.async_rollout",
    "reward_pool": "rewards.pool",
    "adaptive_timeout": "rewards.adaptive_timeout",
    "tiny": "models.tiny",
    "char_tokenizer": "models.char_tokenizer",
    "memo_tokenizer": "models.memo_tokenizer",
    "chat": "models.chat",
    "fault_envs": "faults.sandbox_envs",
    "latency": "faults.latency",
    "eval_config": "eval.config",
    "serve": "serving.app",
    "serve_service": "serving.service",
    "serve_episode": "serving.episode",
    "serve_protocol": "serving.protocol",
    "serve_decode": "serving.decode",
    "serve_guard": "serving.guard",
}
#: old dotted module name -> new dotted module name
MOVED: dict[str, str] = {_OLD + old: _OLD + new for old, new in _RENAMES.items()}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of :data:`MOVED` and loads each as an alias of its new module."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}  # old name -> the new module's spec
        self._lock = threading.Lock()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; the old path is removed in {REMOVED_IN}", DeprecationWarning, stacklevel=2
        )
        module = importlib.import_module(new)
        with self._lock:
            self._specs[spec.name] = module.__spec__
        return module  # the import system then sets __spec__ to the alias's spec: exec_module puts it back

    def exec_module(self, module: ModuleType) -> None:
        alias = module.__spec__
        if alias is None:
            return
        with self._lock:
            module.__spec__ = self._specs.pop(alias.name, alias)


def install() -> MovedModuleFinder:
    """Put a :class:`MovedModuleFinder` first on ``sys.meta_path`` (once; later calls return it)."""
    for finder in sys.meta_path:
        if isinstance(finder, MovedModuleFinder):
            return finder
    finder = MovedModuleFinder()
    sys.meta_path.insert(0, finder)
    return finder
