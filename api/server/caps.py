"""Server-side caps on what a caller may ask for: sandbox resources, network, exec time.

A caller sets a user sandbox's CPUs, memory, processes, workspace and network (``POST /v1/sandboxes``)
and each command's timeout (``POST /v1/sandboxes/{id}/exec``). The server's operator bounds them in
:class:`rockroll.api.server.settings.Settings` (``max_cpus``, ``max_memory_mb``, ``max_pids``,
``max_workspace_mb``, ``max_exec_timeout_s``, ``max_sandbox_ttl_s``; ``network_owners`` names the
owners that may ask for a network, nobody by default). A request over a cap answers 422 ``over_cap``
naming the field, the cap and the setting that raises it; a value the caller leaves out defaults to
the smaller of the sandbox default (``sandbox_ttl_s`` for the lifetime) and the cap. Caps bind admins too (an operator lists them where they need more).

Jobs have caps of their own, per owner (:mod:`rockroll.api.jobs.caps`: config size, active and kept
jobs, steps and episodes, wall-clock time); their 422 is this module's :func:`over_cap` too.

Threat model: every token owner is untrusted; without caps one could take the machine's memory,
processes or disk from every other owner, or reach the network from a sandbox, or hold a sandbox
forever (a sandbox's lifetime, ``ttl_s``, is capped and enforced by :mod:`rockroll.api.sandboxes.ttl`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from rockroll.api.server.errors import ApiError
from rockroll.api.server.settings import Settings

__all__ = ["Cap", "SANDBOX_CAPS", "capped_sandbox", "check_exec_timeout", "over_cap"]


@dataclass(frozen=True)
class Cap:
    """One numeric cap: the request field it bounds and the setting that holds its maximum."""

    field: str
    setting: str

    def env_var(self) -> str:
        return "ROCKROLL_" + self.setting.upper()


#: the numeric fields of ``SandboxCreate`` and the settings that bound them
SANDBOX_CAPS = (
    Cap("cpus", "max_cpus"),
    Cap("memory_mb", "max_memory_mb"),
    Cap("pids_limit", "max_pids"),
    Cap("workspace_mb", "max_workspace_mb"),
)


def capped_sandbox(body: BaseModel, settings: Settings, owner: str) -> BaseModel:
    """``body`` (a ``SandboxCreate``) within the caps: omitted fields lowered to them, 422 when a set one is over."""
    over: list[dict[str, Any]] = []
    lowered: dict[str, Any] = {}
    for cap in SANDBOX_CAPS:
        limit, value = getattr(settings, cap.setting), getattr(body, cap.field)
        if value <= limit:
            continue
        if cap.field in body.model_fields_set:
            over.append({"field": cap.field, "requested": value, "cap": limit, "setting": cap.env_var()})
        else:
            lowered[cap.field] = type(value)(limit)
    ttl_cap = settings.max_sandbox_ttl_s
    if body.ttl_s is None:
        lowered["ttl_s"] = min(settings.sandbox_ttl_s, ttl_cap)
    elif body.ttl_s > ttl_cap:
        over.append(
            {"field": "ttl_s", "requested": body.ttl_s, "cap": ttl_cap, "setting": "ROCKROLL_MAX_SANDBOX_TTL_S"}
        )
    if body.network and owner not in settings.network_owners:
        over.append({"field": "network", "requested": True, "cap": False, "setting": "ROCKROLL_NETWORK_OWNERS"})
    if over:
        raise over_cap(over, owner)
    return body.model_copy(update=lowered) if lowered else body


def check_exec_timeout(timeout_s: float, settings: Settings) -> None:
    """422 ``over_cap`` when a command's timeout is over ``max_exec_timeout_s``."""
    limit = settings.max_exec_timeout_s
    if timeout_s > limit:
        raise over_cap(
            [{"field": "timeout_s", "requested": timeout_s, "cap": limit, "setting": "ROCKROLL_MAX_EXEC_TIMEOUT_S"}],
            "",
        )


def over_cap(over: list[dict[str, Any]], owner: str) -> ApiError:
    """The 422 ``over_cap`` answer naming each field over its cap (``over``: field, requested, cap, setting)."""
    parts = []
    for o in over:
        if o["field"] == "network":
            parts.append(f"network is not allowed for {owner!r} (ROCKROLL_NETWORK_OWNERS lists the owners that may)")
        else:
            parts.append(f"{o['field']}={o['requested']} is over the cap of {o['cap']} ({o['setting']})")
    return ApiError(422, "over_cap", "over this server's caps: " + "; ".join(parts), {"caps": over})
