"""Prometheus metrics of one app (own registry, so several apps can live in one process).

Exported at ``GET /metrics``: sandboxes by state, sandbox restarts, session steps, step latency,
API request latency by route template (and the alert engine's gauges, :mod:`rockroll.api.alerts.engine`).

Who may read it (issue 48 item 7a): with ``Settings.metrics_token`` set, only a caller presenting it as a
bearer token (Prometheus' ``authorization: {credentials_file: ...}``; :func:`scrape_allowed`), who sees
every label. Without it ``/metrics`` stays open, as Prometheus expects of an unauthenticated endpoint, but
shows no owner name nor server path: the values of :data:`PRIVATE_LABELS` are replaced by keyed hashes
(:class:`Redacted`), stable for one key (the cluster secret when set, else one per app start) and
useless to a reader without it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rockroll.api.sandboxes.views import Counts

__all__ = ["Metrics", "RequestTimer", "Redacted", "scrape_allowed", "label_key", "PRIVATE_LABELS"]

#: label -> prefix of its hashed values: owner names and server paths, shown hashed on an open /metrics
PRIVATE_LABELS = {"owner": "o-", "path": "p-"}
_LATENCY_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class _SandboxCollector:
    """Reads sandbox counts and restarts from the placement layer at scrape time."""

    def __init__(self, snapshot: Callable[[], Counts]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self._snapshot()
        by_state = GaugeMetricFamily("rockroll_sandboxes", "Sandboxes by state.", labels=["state"])
        for state, n in sorted(snap.get("by_state", {}).items()):
            by_state.add_metric([state], n)
        yield by_state
        yield GaugeMetricFamily(
            "rockroll_sandbox_restarts", "Restarts summed over live sandboxes.", value=snap.get("restarts", 0)
        )
        yield GaugeMetricFamily(
            "rockroll_sessions_open", "Env sessions open through the API.", value=snap.get("sessions", 0)
        )


class Metrics:
    """The app's metrics."""

    def __init__(self, snapshot: Callable[[], Counts]) -> None:
        self.registry = CollectorRegistry()
        self.steps = Counter("rockroll_session_steps", "Env steps served through the API.", registry=self.registry)
        self.step_latency = Histogram(
            "rockroll_step_latency_seconds",
            "Time to serve one env step.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.request_latency = Histogram(
            "rockroll_api_request_seconds",
            "API request latency by route.",
            ["method", "route", "status"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_SandboxCollector(snapshot))
        self.label_key = secrets.token_bytes(32)  #: hashes private labels when no cluster secret is set

    def observe_step(self, seconds: float) -> None:
        """Count one env step that took ``seconds``."""
        self.steps.inc()
        self.step_latency.observe(seconds)


def label_key(cluster_secret: str, fallback: bytes) -> bytes:
    """The key private labels are hashed with: derived from the cluster secret (stable over restarts and
    replicas), else ``fallback`` (:attr:`Metrics.label_key`, one per app start)."""
    if not cluster_secret:
        return fallback
    return hashlib.sha256(b"rockroll /metrics labels\0" + cluster_secret.encode()).digest()


def scrape_allowed(authorization: str | None, token: str) -> bool:
    """Whether a scrape with the ``Authorization`` header ``authorization`` may read ``/metrics`` (``token``:
    ``Settings.metrics_token``; empty: everyone may, redacted)."""
    if not token:
        return True
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


class Redacted:
    """A view of ``registry`` whose :data:`PRIVATE_LABELS` values are keyed hashes (``owner="o-1f2e..."``);
    an empty value (a platform-wide series) stays empty. Pass it to ``generate_latest``."""

    def __init__(self, registry: CollectorRegistry, key: bytes) -> None:
        self.registry, self.key = registry, key

    def _hash(self, label: str, value: str) -> str:
        if not value:
            return value
        return PRIVATE_LABELS[label] + hmac.new(self.key, value.encode(), hashlib.sha256).hexdigest()[:12]

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            if not any(k in PRIVATE_LABELS for s in metric.samples for k in s.labels):
                yield metric
                continue
            out = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            for s in metric.samples:
                labels = {k: self._hash(k, v) if k in PRIVATE_LABELS else v for k, v in s.labels.items()}
                out.add_sample(s.name, labels, s.value, s.timestamp, s.exemplar)
            yield out


class RequestTimer:
    """Pure ASGI middleware timing every HTTP request by its route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = {"code": 500}

        async def _send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, _send)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            self.metrics.request_latency.labels(scope["method"], path, str(status["code"])).observe(
                time.perf_counter() - t0
            )
