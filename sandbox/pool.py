"""Warm pools: ready sandboxes kept per spec so acquiring or creating one takes milliseconds.

Two kinds, both settings of the manager (:class:`~rockroll.sandbox.manager_config.ManagerConfig`):

* :class:`WarmPoolConfig` (``warm_pool``): started sandboxes that belong to nobody yet, kept per
  spec by :class:`~rockroll.sandbox.warm.WarmPool`; ``SandboxManager.create`` hands one out
  instead of starting a container (see :mod:`rockroll.sandbox.warm`);
* :class:`PoolConfig` (``pools``): named pools of manager-visible sandboxes, leased with
  ``SandboxManager.acquire``, described below.

A pool is named after its spec (``spec.name``). The health monitor tops it up to ``min_idle``
idle sandboxes (ready, not leased, no sessions) without exceeding ``max_total`` members or the
manager's capacity. ``SandboxManager.acquire(pool)`` leases an idle member exclusively;
``release`` deletes it (a used sandbox is dirty) and the monitor starts a fresh one.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from rockroll.envs.config import ConfigModel
from rockroll.sandbox.base import SandboxSpec

__all__ = ["PoolConfig", "WarmPoolConfig"]


class PoolConfig(ConfigModel):
    """One warm pool (frozen and hashable)."""

    model_config = ConfigDict(frozen=True)

    spec: SandboxSpec = Field(default_factory=SandboxSpec, description="the sandboxes' spec; spec.name names the pool")
    min_idle: int = Field(default=1, ge=0, description="idle sandboxes kept ready")
    max_total: int = Field(
        default=4, ge=1, description="most sandboxes of this pool at once (idle, leased or hosting sessions)"
    )

    @model_validator(mode="after")
    def _check(self) -> PoolConfig:
        if self.min_idle > self.max_total:
            raise ValueError(f"min_idle ({self.min_idle}) must not exceed max_total ({self.max_total})")
        return self

    @property
    def name(self) -> str:
        return self.spec.name


class WarmPoolConfig(ConfigModel):
    """The warm pool of started sandboxes that ``create`` draws from (frozen and hashable).

    The caps: ``size`` idle sandboxes per spec, and ``max_total`` over all specs of this manager
    (the manager is the pool's one owner: warm sandboxes count against no ``max_sandboxes`` and no
    API owner until handed out, and the API's per-owner quotas count them from then on).
    """

    model_config = ConfigDict(frozen=True)

    size: int = Field(default=0, ge=0, le=1024, description="idle started sandboxes kept per spec (0: no warm pool)")
    max_total: int = Field(
        default=64,
        ge=1,
        le=4096,
        description="most warm sandboxes of this manager at once (idle or starting), over all specs",
    )
    specs: tuple[SandboxSpec, ...] = Field(
        default=(), description="specs kept warm besides the manager's default_spec (equal but for name: one pool)"
    )
    refill_concurrency: int = Field(
        default=4,
        ge=1,
        le=64,
        description="warm sandboxes started at once while refilling (a few: starts are CPU-bound)",
    )
    check_interval_s: float = Field(
        default=5.0, gt=0, description="seconds between health probes of idle warm sandboxes (a dead one is replaced)"
    )
    handout_timeout_s: float = Field(
        default=1.0, gt=0, description="timeout of the health check a warm sandbox passes before it is handed out"
    )
    preload_envs: bool = Field(
        default=True,
        description="idle warm sandboxes import the env registry in the background, so a first session opens fast",
    )
