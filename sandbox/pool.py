"""Warm pools: ready sandboxes kept per spec so acquiring one takes milliseconds.

A pool is named after its spec (``spec.name``). The health monitor tops it up to ``min_idle``
idle sandboxes (ready, not leased, no sessions) without exceeding ``max_total`` members or the
manager's capacity. ``SandboxManager.acquire(pool)`` leases an idle member exclusively;
``release`` deletes it (a used sandbox is dirty) and the monitor starts a fresh one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rockroll.sandbox.base import SandboxSpec

__all__ = ["PoolConfig"]


@dataclass(frozen=True)
class PoolConfig:
    """One warm pool.

    Attributes:
        spec: the sandboxes' spec; ``spec.name`` names the pool.
        min_idle: idle sandboxes kept ready.
        max_total: most sandboxes of this pool at once (idle, leased or hosting sessions).
    """

    spec: SandboxSpec = field(default_factory=SandboxSpec)
    min_idle: int = 1
    max_total: int = 4

    def __post_init__(self) -> None:
        if self.min_idle < 0 or self.max_total < 1 or self.min_idle > self.max_total:
            raise ValueError(
                f"need 0 <= min_idle <= max_total and max_total >= 1, got {self.min_idle}, {self.max_total}"
            )

    @property
    def name(self) -> str:
        return self.spec.name
