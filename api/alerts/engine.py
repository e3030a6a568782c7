"""The alert engine: evaluates the rules periodically; alerts fire and resolve, and are told to every sink.

Each evaluation (every ``alert_interval_s``, :class:`rockroll.api.server.periodic.Periodic`) observes
the platform (:mod:`rockroll.api.alerts.observe`) and runs the rules (:mod:`rockroll.api.alerts.rules`).
A finding that holds for ``alert_for_s`` fires an alert; a firing alert whose finding has been gone
for ``alert_resolve_s`` resolves (hysteresis: a condition flapping at its threshold fires once). While
it fires its reason and value follow the latest finding.

Firing and resolved alerts go to the log, to the webhook (:mod:`rockroll.api.alerts.webhook`, never
blocking), to ``GET /v1/alerts`` and to the ``/ui`` banner; an owner sees their own alerts and the
platform-wide ones (owner ''), an admin all. Alerts live in this server's memory: each control-plane
replica evaluates and notifies on its own.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily

from rockroll.api.alerts.observe import Observer, Platform
from rockroll.api.alerts.rules import RULES, Finding, Observation, evaluate
from rockroll.api.alerts.webhook import WebhookSender
from rockroll.api.server.auth import Principal
from rockroll.api.server.periodic import Periodic
from rockroll.client.responses import Alert

__all__ = ["AlertEngine"]

log = logging.getLogger("rockroll.api")

HISTORY = 200  #: resolved alerts kept for GET /v1/alerts


class AlertEngine(Periodic):
    """See the module docstring; ``state`` is the app's :class:`rockroll.api.server.state.AppState`."""

    name = "alerts"

    def __init__(self, state: Platform) -> None:
        super().__init__()
        settings = state.settings
        self.settings = settings
        self.interval_s = settings.alert_interval_s
        self.observer = Observer(state)
        self.last: Observation | None = None
        self._active: dict[str, _Tracked] = {}  # key -> alert (pending or firing)
        self._resolved: deque[_Tracked] = deque(maxlen=HISTORY)
        self._lock = threading.Lock()
        registry = state.metrics.registry
        self.dropped = Counter(
            "rockroll_alert_notifications_dropped", "Alert notifications the webhook dropped (queue full or failed).",
            ["why"], registry=registry,
        )  # fmt: skip
        self.notified = Counter(
            "rockroll_alert_notifications", "Alert transitions by status.", ["status"], registry=registry
        )
        registry.register(_AlertCollector(self))
        self.webhook: WebhookSender | None = None
        if settings.alert_webhook_url:
            self.webhook = WebhookSender(
                settings.alert_webhook_url,
                timeout_s=settings.alert_webhook_timeout_s,
                retries=settings.alert_webhook_retries,
                max_queue=settings.alert_webhook_queue,
                on_drop=lambda why: self.dropped.labels(why).inc(),
            )

    def start(self) -> None:
        self.start_ticking()

    def tick(self) -> list[Alert]:
        """One evaluation; the alerts that fired or resolved in it."""
        self.last = self.observer.observe()
        return self.apply(evaluate(self.last, self.settings), time.time())

    def apply(self, findings: dict[str, Finding], now: float) -> list[Alert]:
        """Move the alerts on by ``findings`` (see the module docstring); tell the sinks of each change."""
        changed: list[Alert] = []
        with self._lock:
            for key, f in findings.items():
                alert = self._active.get(key)
                if alert is None:
                    alert = self._active[key] = _Tracked(id=f"al-{secrets.token_hex(6)}", rule=f.rule, key=f.key,
                                                         owner=f.owner, since=now)  # fmt: skip
                alert.reason, alert.value, alert.threshold, alert.severity = f.reason, f.value, f.threshold, f.severity
                alert.clear_since = None
                if alert.status == "pending" and now - alert.since >= self.settings.alert_for_s:
                    alert.status, alert.started_at = "firing", now
                    changed.append(alert.public())
            for key, alert in list(self._active.items()):
                if key in findings:
                    continue
                if alert.status == "pending":
                    del self._active[key]
                    continue
                alert.clear_since = alert.clear_since or now
                if now - alert.clear_since >= self.settings.alert_resolve_s:
                    del self._active[key]
                    alert.status, alert.resolved_at = "resolved", now
                    self._resolved.append(alert)
                    changed.append(alert.public())
        for public in changed:
            self._notify(public)
        return changed

    def _notify(self, alert: Alert) -> None:
        self.notified.labels(alert["status"]).inc()
        whom = f" (owner {alert['owner']})" if alert["owner"] else ""
        if alert["status"] == "firing":
            log.warning("alert firing: %s%s: %s", alert["key"], whom, alert["reason"])
        else:
            log.info("alert resolved: %s%s (was: %s)", alert["key"], whom, alert["reason"])
        if self.webhook is not None:
            self.webhook.submit(alert)

    def alerts(self, who: Principal, *, resolved: bool = True) -> list[Alert]:
        """The firing alerts ``who`` may see (theirs and platform-wide ones), newest first, then (``resolved``)
        the recently resolved ones."""
        with self._lock:
            firing = [a for a in self._active.values() if a.status == "firing"]
            done = list(self._resolved) if resolved else []
        seen = [a.public() for a in firing if a.visible_to(who)]
        seen.sort(key=lambda a: a["started_at"] or 0, reverse=True)
        return seen + [a.public() for a in reversed(done) if a.visible_to(who)]

    def firing_counts(self) -> dict[str, int]:
        with self._lock:
            counts = dict.fromkeys(RULES, 0)
            for a in self._active.values():
                if a.status == "firing":
                    counts[a.rule] = counts.get(a.rule, 0) + 1
        return counts

    def close(self) -> None:
        self.stop_ticking()
        if self.webhook is not None:
            self.webhook.close()


@dataclass
class _Tracked:
    """An alert as the engine tracks it: pending (``since`` its finding appeared), firing or resolved; its
    finding gone ``clear_since`` (None while it holds)."""

    id: str
    rule: str
    key: str
    owner: str
    since: float
    status: str = "pending"
    severity: str = "warning"
    reason: str = ""
    value: float = 0.0
    threshold: float = 0.0
    started_at: float | None = None
    resolved_at: float | None = None
    clear_since: float | None = None

    def visible_to(self, who: Principal) -> bool:
        return who.admin or self.owner in ("", who.owner)

    def public(self) -> Alert:
        """The alert as the API, the page and the webhook show it."""
        return Alert(
            id=self.id, rule=self.rule, key=self.key, owner=self.owner, status=self.status, severity=self.severity,
            reason=self.reason, value=self.value, threshold=self.threshold, started_at=self.started_at,
            resolved_at=self.resolved_at,
        )  # fmt: skip


class _AlertCollector:
    """``rockroll_alerts_firing{rule}`` and the measured quantities the rules read, at scrape time."""

    def __init__(self, engine: AlertEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[GaugeMetricFamily]:
        firing = GaugeMetricFamily("rockroll_alerts_firing", "Alerts firing now, by rule.", labels=["rule"])
        for rule, n in sorted(self.engine.firing_counts().items()):
            firing.add_metric([rule], n)
        yield firing
        o = self.engine.last or Observation(window_s=self.engine.settings.alert_window_s)
        yield GaugeMetricFamily("rockroll_nodes_lost", "Node agents declared lost.", value=len(o.nodes_lost))
        yield GaugeMetricFamily(
            "rockroll_sandbox_start_failures",
            "Sandbox start failures since the server started (boots and warm starts).",
            value=self.engine.observer.starts.points[-1][1] if self.engine.observer.starts.points else 0,
        )
        jobs = GaugeMetricFamily(
            "rockroll_job_failures_recent", "Failed jobs within alert_window_s, by owner.", labels=["owner"]
        )
        for owner, n in sorted(o.job_failures.items()):
            jobs.add_metric([owner], n)
        yield jobs
        yield GaugeMetricFamily("rockroll_database_bytes", "Size of the control plane's database.", value=o.db_bytes)
        disk = GaugeMetricFamily(
            "rockroll_disk_free_ratio", "Free share of the disks the server writes.", labels=["path"]
        )
        for path, free in sorted(o.disk_free.items()):
            disk.add_metric([path], free)
        yield disk
