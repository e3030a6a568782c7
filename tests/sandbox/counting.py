"""A :class:`~rockroll.agentrl.sources.sandbox.SandboxSource` that counts the sessions it opens (tests of
hedging through sandboxes and of a training run's env episodes in sandboxes)."""

from __future__ import annotations

from typing import Any, ClassVar

from rockroll.agentrl.sources.kinds import SandboxSource

__all__ = ["CountingSource", "counting_source"]


class CountingSource(SandboxSource):
    """Counts on its class (``opened``) the new sessions its instances open: a run that builds its own source
    from the class (a monkeypatched ``SandboxSource``) is counted too."""

    opened: ClassVar[int] = 0

    def _new_session(self, *args: Any, **kwargs: Any) -> Any:
        session = super()._new_session(*args, **kwargs)
        type(self).opened += 1
        return session


def counting_source() -> type[CountingSource]:
    """A fresh :class:`CountingSource` subclass, its count at 0 (one per test: counts never leak across)."""
    return type("CountingSource", (CountingSource,), {"opened": 0})
