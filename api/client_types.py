"""Typed shapes of the API's JSON answers, as returned by :class:`rockroll.api.client.Client`."""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["EnvInfo", "SandboxInfo", "ExecOutput", "SessionInfo", "ResetResult", "StepResult", "JobInfo", "Health"]


class Health(TypedDict):
    status: str
    backend: str
    sandboxes: dict[str, int]
    restarts: int
    sessions: int
    uptime_s: float
    dev_mode: bool


class EnvInfo(TypedDict, total=False):
    id: str
    name: str
    version: int
    kind: str  # builtin | entry_point | image | source
    builtin: bool
    owner: str
    entry_point: str
    image: str
    source_name: str
    source_bytes: int
    kwargs: dict[str, Any]
    max_steps: int | None
    description: str
    tags: list[str]
    created_at: float
    validation: dict[str, Any]  # only in the answer to a registration


class SandboxInfo(TypedDict):
    id: str
    state: str  # starting | ready | unhealthy | restarting | stopped
    pool: str
    backend: str
    image: str
    generation: int
    restarts: int
    sessions: int
    max_sessions: int
    leased: bool
    created_at: float
    age_s: float
    uptime_s: float
    cpu_seconds: float
    memory_bytes: int
    spec: dict[str, Any]
    owner: str


class ExecOutput(TypedDict):
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    oom_killed: bool
    duration_s: float
    ok: bool


class SessionInfo(TypedDict, total=False):
    id: str
    sandbox_id: str
    env: str
    system_prompt: str
    owner: str
    steps: int
    created_at: float


class ResetResult(TypedDict):
    observation: str
    info: dict[str, Any]


class StepResult(TypedDict):
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class JobInfo(TypedDict):
    id: str
    owner: str
    kind: str
    config: dict[str, Any]
    state: str  # queued | running | succeeded | failed | cancelled
    progress: float
    metrics: dict[str, Any]
    error: str
    created_at: float
    started_at: float | None
    finished_at: float | None
