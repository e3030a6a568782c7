"""The alert settings of the control plane's :class:`~rockroll.api.server.settings.Settings` (a base it extends).

Fields only: ``Settings`` holds the environment prefix (``ROCKROLL_``), validation and its other fields.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

__all__ = ["AlertSettings"]


class AlertSettings(BaseSettings):
    """Settings of the proactive alerts (:mod:`rockroll.api.alerts`)."""

    # proactive alerts (issue 36 item 2): rules over what the platform measures (rockroll.api.alerts)
    alert_interval_s: float = Field(default=5.0, gt=0, le=3600, description="How often the alert rules are evaluated.")
    alert_for_s: float = Field(
        default=0.0, ge=0, le=86_400, description="An alert fires once its condition has held this long (0: at once)."
    )
    alert_resolve_s: float = Field(
        default=60.0,
        ge=0,
        le=86_400,
        description="A firing alert resolves once its condition has been clear this long (hysteresis: a flapping "
        "condition does not fire and resolve on every evaluation).",
    )
    alert_window_s: float = Field(
        default=600.0,
        gt=0,
        le=7 * 86_400,
        description="The window events are counted over (restarts, start failures, jobs).",
    )
    alert_restarts_per_env: int = Field(
        default=3,
        ge=1,
        le=100_000,
        description="Sandbox restarts of one env (per owner) within alert_window_s that fire.",
    )
    alert_unhealthy_share: float = Field(
        default=0.25, gt=0, le=1, description="Share of sandboxes unhealthy or restarting that fires (platform-wide)."
    )
    alert_step_p99_s: float = Field(
        default=2.0, gt=0, le=3600, description="P99 env step latency (seconds) over alert_window_s that fires."
    )
    alert_step_min_count: int = Field(
        default=20, ge=1, le=1_000_000, description="Steps within alert_window_s needed before the P99 rule judges."
    )
    alert_start_failures: int = Field(
        default=3,
        ge=1,
        le=100_000,
        description="Sandbox start failures within alert_window_s that fire (platform-wide).",
    )
    alert_job_failures: int = Field(
        default=3, ge=1, le=100_000, description="Failed jobs of one owner within alert_window_s that fire."
    )
    alert_db_growth_bytes: int = Field(
        default=500_000_000, ge=1, description="Database growth (bytes) within alert_window_s that fires."
    )
    alert_disk_free_share: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="Free share of the disk holding the database, sandbox state or job folders under which an "
        "alert fires (0: never).",
    )
    alert_webhook_url: str = Field(
        default="",
        max_length=2000,
        pattern=r"^(https?://\S+)?$",
        description="Where firing and resolved alerts are POSTed as JSON (empty: nowhere); retried with backoff "
        "from a bounded queue, so a slow or dead receiver never holds up the server.",
    )
    alert_webhook_timeout_s: float = Field(default=5.0, gt=0, le=120, description="Timeout of one webhook POST.")
    alert_webhook_retries: int = Field(
        default=5, ge=0, le=100, description="Retries of a failed webhook POST (backoff)."
    )
    alert_webhook_queue: int = Field(
        default=1000, ge=1, le=1_000_000, description="Alerts waiting for the webhook; more are dropped (and counted)."
    )
