"""Prometheus metrics of one app (own registry, so several apps can live in one process).

Exported at ``GET /metrics``: sandboxes by state, sandbox restarts, session steps, step latency,
API request latency by route template.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rockroll.api.sandboxes.views import Counts

__all__ = ["Metrics", "RequestTimer"]

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

    def observe_step(self, seconds: float) -> None:
        """Count one env step that took ``seconds``."""
        self.steps.inc()
        self.step_latency.observe(seconds)


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
