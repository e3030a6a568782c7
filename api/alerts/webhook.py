"""Alert notifications POSTed to a webhook: a bounded queue and one sender thread, retried with backoff.

The control plane only ever puts an alert in the queue (never blocks): a receiver that is down or slow
holds up the sender thread alone. A full queue drops the new alert and counts it
(``rockroll_alert_notifications_dropped_total``); so does a POST that failed every retry.

Threat model: the URL is the operator's (a setting); answers are not read beyond their status.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

import httpx

from rockroll.client.responses import Alert

__all__ = ["WebhookSender", "backoff_s"]

log = logging.getLogger("rockroll.api")

MAX_BACKOFF_S = 30.0


def backoff_s(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): 0.5, 1, 2, ... capped at 30."""
    return min(MAX_BACKOFF_S, 0.5 * 2 ** (attempt - 1))


class WebhookSender:
    """Sends each queued alert as one JSON POST to ``url`` (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        retries: int = 5,
        max_queue: int = 1000,
        on_drop: Callable[[str], None] | None = None,
    ) -> None:
        self.url, self.retries = url, retries
        self.sent = 0
        self._queue: queue.Queue[Alert | None] = queue.Queue(maxsize=max_queue)
        self._on_drop = on_drop or (lambda _why: None)
        self._stop = threading.Event()
        self._client = httpx.Client(timeout=timeout_s)
        self._thread = threading.Thread(target=self._run, name="alert-webhook", daemon=True)
        self._thread.start()

    def submit(self, alert: Alert) -> bool:
        """Queue ``alert`` (never blocks); False, and counted as dropped, when the queue is full."""
        try:
            self._queue.put_nowait(alert)
        except queue.Full:
            self._on_drop("queue_full")
            log.warning("alert webhook queue full: dropped %s %s", alert.get("status"), alert.get("key"))
            return False
        return True

    def pending(self) -> int:
        return self._queue.qsize()

    def _run(self) -> None:
        while not self._stop.is_set():
            alert = self._queue.get()
            if alert is None:
                return
            self._deliver(alert)

    def _deliver(self, alert: Alert) -> None:
        for attempt in range(self.retries + 1):
            if attempt and self._stop.wait(backoff_s(attempt)):
                return
            try:
                resp = self._client.post(self.url, json=alert)
                if resp.status_code < 300:
                    self.sent += 1
                    return
                why = f"HTTP {resp.status_code}"
            except httpx.HTTPError as e:
                why = f"{type(e).__name__}: {e}"
            log.warning("alert webhook POST failed (attempt %d of %d): %s", attempt + 1, self.retries + 1, why)
        self._on_drop("failed")

    def close(self) -> None:
        self._stop.set()
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            pass
        self._client.close()
