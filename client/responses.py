"""The API's answers: one TypedDict per JSON response, each route's ``response_model``.

Written once, used on both sides: FastAPI validates every answer against them and shows them in
the OpenAPI schema (``/docs``), and the client SDK (:mod:`rockroll.client.sdk`) returns them as its
typed results. TypedDicts, not BaseModels, because the SDK hands out the JSON as plain dicts
(``job["state"]``).

Kept byte-compatible with the answers the routes wrote before they were declared: fields are listed
in the order the routes write them (validation re-emits them in declared order), numbers are
:data:`Number` (an int stays an int, a float a float), and every type allows extra keys
(``extra="allow"``) so validation never drops a field. ``tests/api/test_responses.py`` checks that
each answer has exactly the declared keys, in order.

Two files: :mod:`rockroll.client.resource_responses` holds the answers about resources (health, envs,
sandboxes, nodes, sessions) and the helpers every answer is declared with; this module holds the answers
of jobs, pools, metrics, alerts and the overview page (``/ui``), and re-exports them all: import from here.
"""

from __future__ import annotations

from typing import Annotated, Any

from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from rockroll.client.job_state import JobState
from rockroll.client.resource_responses import (
    Actions,
    BatchResults,
    DataPlane,
    DataPlaneToken,
    EnvInfo,
    EnvList,
    EnvValidation,
    ExecOutput,
    FileWritten,
    Health,
    ItemError,
    NodeList,
    NodeLostAnswer,
    NodeRegistered,
    NodeView,
    Number,
    Ok,
    ResetResult,
    SandboxInfo,
    SandboxList,
    SessionInfo,
    SessionList,
    SessionOpened,
    SessionState,
    StepResult,
    _d,
    _open,
)

__all__ = [
    "Number", "Health", "EnvValidation", "EnvInfo", "EnvList", "SandboxInfo", "SandboxList", "ExecOutput",
    "FileWritten", "DataPlane", "DataPlaneToken", "NodeRegistered", "NodeLostAnswer", "NodeView", "NodeList",
    "SessionOpened", "SessionInfo", "SessionList", "ResetResult", "StepResult", "ItemError", "BatchResults",
    "Actions", "SessionState", "Ok", "JobInfo", "JobList", "PoolInfo", "Principal",
    "OverviewSandbox", "Overview", "MetricPoint", "JobMetrics", "NodeCounts", "Summary", "RestartEvent",
    "OverviewJob", "Alert", "AlertList",
]  # fmt: skip


@_open
class JobInfo(TypedDict):
    id: str
    owner: str
    kind: Annotated[str, _d("train | eval.")]
    config: dict[str, Any]
    state: JobState
    progress: Annotated[Number, _d("0 to 1.")]
    metrics: Annotated[dict[str, Any], _d("Latest metrics.")]
    error: Annotated[str, _d("Why it failed ('' otherwise).")]
    created_at: Number
    started_at: Number | None
    finished_at: Number | None


@_open
class JobList(TypedDict):
    jobs: list[JobInfo]


@_open
class PoolInfo(TypedDict):
    name: str
    min_idle: int | None
    max_total: int | None
    members: int
    ready: int
    sessions: int


@_open
class Principal(TypedDict):
    owner: str
    admin: bool


@_open
class MetricPoint(TypedDict):
    t: Annotated[Number, _d("When the job reported it (unix time).")]
    metrics: Annotated[dict[str, Number], _d("The numeric metrics of that report.")]


@_open
class JobMetrics(TypedDict):
    """Every numeric metrics report of a job, oldest first (kept in memory since the server started)."""

    job_id: str
    points: list[MetricPoint]


@_open
class OverviewSandbox(SandboxInfo):
    api_sessions: Annotated[int, _d("The caller's sessions on it.")]
    node: Annotated[str, _d("Where it runs: its Docker host, or this machine's name.")]


@_open
class NodeCounts(TypedDict):
    sandboxes: int
    sessions: int


@_open
class Summary(TypedDict):
    """Counts of the overview's own lists."""

    sandboxes: int
    sessions: int
    sandboxes_by_state: dict[str, int]
    sessions_by_env: dict[str, int]
    by_node: dict[str, NodeCounts]


@_open
class RestartEvent(TypedDict):
    """One replacement of a sandbox under its id (since the server started)."""

    time: Number
    sandbox_id: str
    pool: str
    generation: Annotated[int, _d("The generation it was replaced from.")]
    reason: Annotated[str, _d("Why: dead (and how), unhealthy, restarted through the API...")]
    owner: Annotated[str, _d("Its owner ('' for pooled sandboxes).")]


@_open
class OverviewJob(TypedDict):
    """A job as the overview shows it: no config (``GET /v1/jobs/{id}`` has it), at most 32 metrics."""

    id: str
    owner: str
    kind: Annotated[str, _d("train | eval.")]
    state: JobState
    progress: Annotated[Number, _d("0 to 1.")]
    metrics: Annotated[dict[str, Any], _d("Latest metrics (the first 32).")]
    error: Annotated[str, _d("Why it failed ('' otherwise).")]
    created_at: Number
    started_at: Number | None
    finished_at: Number | None
    history: Annotated[
        list[MetricPoint], _d("Metrics reports, oldest first (the newest jobs only, thinned to 60, 6 metrics).")
    ]


@_open
class Alert(TypedDict):
    """An alert of the control plane's rules (``rockroll.api.alerts``), firing or resolved."""

    id: str
    rule: Annotated[str, _d("restart_rate, unhealthy_share, node_lost, step_latency_p99, start_failures, ...")]
    key: Annotated[str, _d("What it concerns: the rule and its subject (an env, a node, an owner).")]
    owner: Annotated[str, _d("The owner it concerns ('' : the platform).")]
    status: Annotated[str, _d("firing | resolved.")]
    severity: Annotated[str, _d("warning | critical.")]
    reason: Annotated[str, _d("Why, with the value measured and the threshold.")]
    value: Number
    threshold: Number
    started_at: Number | None
    resolved_at: Number | None


@_open
class AlertList(TypedDict):
    alerts: Annotated[list[Alert], _d("Firing alerts (newest first), then recently resolved ones.")]


@_open
class Overview(TypedDict):
    """Everything the ``/ui`` page shows."""

    time: Number
    backend: str
    isolation: Annotated[str, _d("The sandboxes' isolation level and the server's min_isolation.")]
    principal: Principal
    summary: Summary
    sandboxes: list[OverviewSandbox]
    pools: list[PoolInfo]
    envs: list[EnvInfo]
    sessions: list[SessionInfo]
    restarts: Annotated[list[RestartEvent], _d("Restarts of the sandboxes shown, newest first.")]
    jobs: list[OverviewJob]
    alerts: Annotated[list[Alert], _d("Firing alerts the caller may see (theirs and platform-wide ones).")]
    totals: Annotated[
        dict[str, int],
        _d("How many of each list the caller may see; each list holds the first ones (at most `limit`, and the "
           "whole answer stays under 100 kB): page through /v1/sandboxes, /v1/sessions, /v1/jobs, /v1/envs."),
    ]  # fmt: skip
