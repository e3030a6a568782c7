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
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, WithJsonSchema, with_config
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from rockroll.client.job_state import JobState

__all__ = [
    "Number", "Health", "EnvValidation", "EnvInfo", "EnvList", "SandboxInfo", "SandboxList", "ExecOutput",
    "FileWritten", "DataPlane", "DataPlaneToken", "NodeRegistered", "NodeLostAnswer", "NodeView", "NodeList", "SessionOpened", "SessionInfo", "SessionList", "ResetResult", "StepResult", "ItemError",
    "BatchResults", "Actions", "SessionState", "Ok", "JobInfo", "JobList", "PoolInfo", "Principal",
    "OverviewSandbox", "Overview", "MetricPoint", "JobMetrics", "NodeCounts", "Summary", "RestartEvent",
    "OverviewJob", "Alert", "AlertList",
]  # fmt: skip

Number = Annotated[float | int, WithJsonSchema({"type": "number"})]
"""A JSON number passed through as it is (pydantic's ``float`` would turn ``0`` into ``0.0``)."""

_open = with_config(ConfigDict(extra="allow"))


def _d(text: str) -> Any:
    return Field(description=text)


@_open
class Health(TypedDict):
    status: Annotated[str, _d('"ok" while the server answers.')]
    backend: Annotated[str, _d("Sandbox backend: docker or process.")]
    isolation: Annotated[
        str, _d("The sandboxes' isolation level and the server's min_isolation (rockroll.sandbox.confinement).")
    ]
    sandboxes: Annotated[dict[str, int], _d("Number of sandboxes in each state.")]
    restarts: Annotated[int, _d("Sandbox restarts since the server started.")]
    sessions: Annotated[int, _d("Open env sessions.")]
    uptime_s: Number
    dev_mode: Annotated[bool, _d("Development mode: no token needed.")]


@_open
class EnvValidation(TypedDict):
    """What the registration played in a sandbox: ``reset`` and one ``step``."""

    sandbox_id: str
    action: str
    reward: Number
    terminated: bool
    truncated: bool


@_open
class EnvInfo(TypedDict):
    id: Annotated[str, _d("Versioned id: 'FrozenLake-v0' (built in), 'alice/Maze-v0' (alice's custom env).")]
    name: Annotated[str, _d("The id's name, without namespace and version.")]
    version: int
    kind: Annotated[str, _d("builtin | entry_point | image | source.")]
    builtin: bool
    owner: Annotated[str, _d("Who registered it, its namespace ('rockroll' for built-in envs).")]
    visibility: Annotated[str, _d("private (its owner and admins only) | public (everyone; built-in envs).")]
    entry_point: Annotated[str, _d("'module:Class' ('' when the spec has a callable).")]
    kwargs: Annotated[dict[str, Any], _d("Default constructor kwargs.")]
    max_steps: int | None
    description: str
    tags: list[str]
    image: Annotated[str, _d("Docker image (kind 'image').")]
    source_name: Annotated[str, _d("File name of the upload (kind 'source').")]
    source_bytes: int
    created_at: Number
    validation: NotRequired[Annotated[EnvValidation, _d("Only in the answer to a registration.")]]


@_open
class EnvList(TypedDict):
    envs: list[EnvInfo]


@_open
class SandboxInfo(TypedDict):
    id: str
    state: Annotated[str, _d("starting | ready | unhealthy | restarting | stopped.")]
    pool: str
    backend: str
    image: str
    generation: Annotated[int, _d("Times the sandbox was replaced under this id.")]
    restarts: int
    sessions: int
    max_sessions: int
    leased: Annotated[bool, _d("Held by one user (not shared by sessions).")]
    created_at: Number
    age_s: Number
    uptime_s: Number
    cpu_seconds: Number
    memory_bytes: int
    spec: Annotated[dict[str, Any], _d("The sandbox's resources (fields of SandboxCreate and more).")]
    owner: str
    expires_at: Annotated[
        Number | None, _d("When the server stops it (epoch seconds; its ttl_s after creation); null: never.")
    ]


@_open
class SandboxList(TypedDict):
    sandboxes: list[SandboxInfo]


@_open
class ExecOutput(TypedDict):
    """A command's outcome: a timeout or OOM kill is a result, not an error."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: Annotated[bool, _d("Output was cut at max_output.")]
    oom_killed: bool
    duration_s: Number
    ok: Annotated[bool, _d("exit_code == 0 and not timed_out.")]


@_open
class FileWritten(TypedDict):
    path: str
    size: int


@_open
class DataPlane(TypedDict):
    endpoint: Annotated[str, _d("Base URL of the node agent that serves the session (its /v1/node routes).")]
    node: Annotated[str, _d("The node agent's id.")]
    token: Annotated[str, _d("Signed session token for the node agent (Authorization: Bearer).")]
    expires_at: Annotated[Number, _d("Unix time the token expires (refresh: POST /v1/sessions/{id}/token).")]


@_open
class NodeRegistered(TypedDict):
    id: str
    heartbeat_s: Annotated[Number, _d("Send the registration again this often.")]
    stale_s: Annotated[Number, _d("An agent silent this long leaves placement.")]
    forget_sessions: Annotated[bool, _d("The agent was declared lost: drop the sessions it still holds.")]
    revoked: Annotated[list[str], _d("Ids of revoked API tokens: refuse session tokens asked with them.")]


@_open
class NodeLostAnswer(TypedDict):
    lost: Annotated[bool, _d("True when this report took the agent out (False: it was lost already).")]


@_open
class NodeView(TypedDict):
    id: str
    endpoint: Annotated[str, _d("Data-plane base URL ('' for the embedded agent: this server's URL).")]
    capacity: int
    sessions: int
    embedded: bool
    live: bool
    lost: Annotated[str, _d("Why the agent was declared lost ('' while it serves); its sessions answer 410.")]
    last_seen_s: Number


@_open
class NodeList(TypedDict):
    nodes: list[NodeView]


@_open
class DataPlaneToken(TypedDict):
    data_plane: DataPlane


@_open
class SessionOpened(TypedDict):
    id: str
    sandbox_id: str
    env: str
    system_prompt: NotRequired[Annotated[str, _d("Not in the answer to a fork.")]]
    tools: NotRequired[Annotated[list[dict[str, Any]], _d("The env's tools, OpenAI function schemas.")]]
    data_plane: NotRequired[Annotated[DataPlane, _d("Where to step the session directly, and the token for it.")]]


@_open
class SessionInfo(TypedDict):
    id: str
    owner: str
    env: str
    sandbox_id: str
    steps: int
    created_at: Number
    system_prompt: str
    tools: Annotated[list[dict[str, Any]], _d("The env's tools, OpenAI function schemas ([]: a text env).")]


@_open
class SessionList(TypedDict):
    sessions: list[SessionInfo]


@_open
class ResetResult(TypedDict):
    observation: str
    info: dict[str, Any]


@_open
class StepResult(TypedDict):
    observation: str
    reward: Number
    terminated: Annotated[bool, _d("The episode ended (goal reached or lost).")]
    truncated: Annotated[bool, _d("The episode was cut (step limit).")]
    info: dict[str, Any]


@_open
class ItemError(TypedDict):
    """A batch item that failed alone: the error body of the same failure on the single routes."""

    error: Annotated[dict[str, Any], _d("{code, message, details}.")]
    status: Annotated[int, _d("The HTTP status the single route would answer.")]


@_open
class BatchResults(TypedDict):
    results: Annotated[list[StepResult | ResetResult | ItemError], _d("One per item, in order.")]


@_open
class Actions(TypedDict):
    actions: Annotated[list[str], _d("Legal actions now (answer text without the <answer> tags).")]


@_open
class SessionState(TypedDict):
    state: Annotated[dict[str, Any], _d("A snapshot of the env (PUT it back to restore).")]


@_open
class Ok(TypedDict):
    ok: bool


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
