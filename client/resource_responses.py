"""The API's answers about its resources: health, envs, sandboxes, nodes and sessions (with their steps).

Part of :mod:`rockroll.client.responses`, which re-exports every name here and states the rules they follow
(byte-compatible with the routes' JSON, fields in the order the routes write them, numbers as
:data:`Number`, extra keys allowed). Import them from there. Also holds what every answer is declared
with: :data:`Number`, ``_open`` (``extra="allow"``) and ``_d`` (a field's description).
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, WithJsonSchema, with_config
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

__all__ = [
    "Number", "Health", "EnvValidation", "EnvInfo", "EnvList", "SandboxInfo", "SandboxList", "ExecOutput",
    "FileWritten", "DataPlane", "DataPlaneToken", "NodeRegistered", "NodeLostAnswer", "NodeView", "NodeList",
    "SessionOpened", "SessionInfo", "SessionList", "ResetResult", "StepResult", "ItemError", "BatchResults",
    "Actions", "SessionState", "Ok",
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
