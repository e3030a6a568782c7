"""Alert rules: pure functions from one :class:`Observation` of the platform to the conditions that hold now.

Each rule answers a list of :class:`Finding` (one per thing it concerns: an env of an owner, a node,
an owner's jobs, the platform); the engine (:mod:`rockroll.api.alerts.engine`) turns findings that
appear and disappear into alerts that fire and resolve. Thresholds are the server's settings
(``alert_*`` in :mod:`rockroll.api.server.settings`). A rule is one function plus one entry in
:data:`RULES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rockroll.api.server.settings import Settings

__all__ = ["Finding", "Observation", "RULES", "evaluate"]


@dataclass(frozen=True)
class Finding:
    """A condition that holds now: ``key`` names the alert (``rule:subject``), ``owner`` whom it concerns
    ('' : the platform, every owner sees it)."""

    rule: str
    key: str
    owner: str
    value: float
    threshold: float
    reason: str
    severity: str = "warning"


@dataclass
class Observation:
    """What the platform measured, as the rules read it (built by the engine each evaluation)."""

    window_s: float
    #: sandbox restarts within the window: ``(env, owner)`` of each ('' owner: a shared sandbox)
    restarts: list[tuple[str, str]] = field(default_factory=list)
    sandboxes_by_state: dict[str, int] = field(default_factory=dict)
    #: node agents declared lost: id -> why
    nodes_lost: dict[str, str] = field(default_factory=dict)
    step_count: int = 0  #: env steps served within the window
    step_p99_s: float = 0.0  #: their P99 latency (a histogram bucket's upper bound)
    start_failures: int = 0  #: sandbox start failures within the window
    job_failures: dict[str, int] = field(default_factory=dict)  #: owner -> failed jobs within the window
    db_growth_bytes: int = 0  #: how much the database grew within the window
    db_bytes: int = 0
    disk_free: dict[str, float] = field(default_factory=dict)  #: path -> free share of its disk


def restart_rate(o: Observation, s: Settings) -> list[Finding]:
    counts: dict[tuple[str, str], int] = {}
    for env, owner in o.restarts:
        counts[(env, owner)] = counts.get((env, owner), 0) + 1
    return [
        Finding("restart_rate", f"restart_rate:{owner}:{env}", owner, n, s.alert_restarts_per_env,
                f"sandboxes of {env} restarted {n} times in {o.window_s:g} s (threshold {s.alert_restarts_per_env})")
        for (env, owner), n in sorted(counts.items())
        if n >= s.alert_restarts_per_env
    ]  # fmt: skip


def unhealthy_share(o: Observation, s: Settings) -> list[Finding]:
    total = sum(n for state, n in o.sandboxes_by_state.items() if state != "stopped")
    bad = o.sandboxes_by_state.get("unhealthy", 0) + o.sandboxes_by_state.get("restarting", 0)
    if not total or bad / total < s.alert_unhealthy_share:
        return []
    why = f"{bad} of {total} sandboxes are unhealthy or restarting ({bad / total:.0%}; threshold "
    return [Finding("unhealthy_share", "unhealthy_share", "", bad / total, s.alert_unhealthy_share,
                    why + f"{s.alert_unhealthy_share:.0%})", "critical")]  # fmt: skip


def node_lost(o: Observation, s: Settings) -> list[Finding]:
    return [
        Finding("node_lost", f"node_lost:{node}", "", 1, 1, f"node agent {node} is lost: {why}", "critical")
        for node, why in sorted(o.nodes_lost.items())
    ]


def step_latency(o: Observation, s: Settings) -> list[Finding]:
    if o.step_count < s.alert_step_min_count or o.step_p99_s < s.alert_step_p99_s:
        return []
    why = f"P99 env step latency is {o.step_p99_s:g} s over {o.step_count} steps in {o.window_s:g} s"
    return [Finding("step_latency_p99", "step_latency_p99", "", o.step_p99_s, s.alert_step_p99_s,
                    why + f" (threshold {s.alert_step_p99_s:g} s)")]  # fmt: skip


def start_failures(o: Observation, s: Settings) -> list[Finding]:
    if o.start_failures < s.alert_start_failures:
        return []
    why = f"{o.start_failures} sandbox starts failed in {o.window_s:g} s (threshold {s.alert_start_failures})"
    return [Finding("start_failures", "start_failures", "", o.start_failures, s.alert_start_failures, why)]


def job_failures(o: Observation, s: Settings) -> list[Finding]:
    return [
        Finding("job_failures", f"job_failures:{owner}", owner, n, s.alert_job_failures,
                f"{n} jobs of {owner} failed in {o.window_s:g} s (threshold {s.alert_job_failures})")
        for owner, n in sorted(o.job_failures.items())
        if n >= s.alert_job_failures
    ]  # fmt: skip


def storage(o: Observation, s: Settings) -> list[Finding]:
    out = []
    if o.db_growth_bytes >= s.alert_db_growth_bytes:
        why = f"the database grew {o.db_growth_bytes} bytes in {o.window_s:g} s to {o.db_bytes} bytes"
        out.append(Finding("db_growth", "db_growth", "", o.db_growth_bytes, s.alert_db_growth_bytes,
                           why + f" (threshold {s.alert_db_growth_bytes})"))  # fmt: skip
    for path, free in sorted(o.disk_free.items()):
        if free < s.alert_disk_free_share:
            why = f"the disk holding {path} is {free:.1%} free (threshold {s.alert_disk_free_share:.1%})"
            out.append(Finding("disk_free", f"disk_free:{path}", "", free, s.alert_disk_free_share, why, "critical"))
    return out


#: every rule, by name
RULES: dict[str, Callable[[Observation, Settings], list[Finding]]] = {
    "restart_rate": restart_rate,
    "unhealthy_share": unhealthy_share,
    "node_lost": node_lost,
    "step_latency_p99": step_latency,
    "start_failures": start_failures,
    "job_failures": job_failures,
    "storage": storage,
}


def evaluate(o: Observation, settings: Settings) -> dict[str, Finding]:
    """Every rule's findings, by key."""
    return {f.key: f for rule in RULES.values() for f in rule(o, settings)}
