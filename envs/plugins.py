"""Entry-point plugins: how an upper layer fills a registry of a lower one without being imported by it.

A registry here (SWE-v0's executor kinds, :mod:`rockroll.envs.swe.executor`) or in a layer above
(env source kinds, :mod:`rockroll.agentrl.sources.kinds`) names an entry-point group; pyproject.toml
maps the group to the modules that register into it, like Gymnasium's ``gymnasium.envs`` group.
:func:`load_plugins` imports them once, the first time the registry misses a name.

Every installed copy of a distribution counts, not only the first one on ``sys.path``: a stale
``rockroll.egg-info`` left in a checkout by an in-tree build would otherwise hide the entry points
of the installed package.
"""

from __future__ import annotations

import threading
from importlib.metadata import EntryPoint, distributions

__all__ = ["plugin_entry_points", "load_plugins"]

_loaded: set[str] = set()
_lock = threading.Lock()


def plugin_entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` across every installed distribution (each ``name = value`` once)."""
    seen: dict[tuple[str, str], EntryPoint] = {}
    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group == group:
                seen.setdefault((ep.name, ep.value), ep)
    return list(seen.values())


def load_plugins(group: str) -> None:
    """Import the targets of ``group``'s entry points, once per process (they register themselves).

    An ``ImportError`` of a plugin propagates (the group is tried again on the next call).
    """
    with _lock:
        if group in _loaded:
            return
        for ep in plugin_entry_points(group):
            ep.load()
        _loaded.add(group)
