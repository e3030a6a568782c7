"""Request bodies of the HTTP API (pydantic, ``extra="forbid"``, every field bounded)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "EnvCreate",
    "SandboxCreate",
    "ExecRequest",
    "SessionCreate",
    "ResetRequest",
    "StepRequest",
    "StateBody",
    "BatchStepRequest",
    "BatchStepItem",
    "JobCreate",
]

_ID = r"^[A-Za-z][A-Za-z0-9_.]*-v\d+$"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnvCreate(_Body):
    """A custom env to register (see :mod:`rockroll.api.catalog` for the kinds)."""

    id: str = Field(..., max_length=128, pattern=_ID, description="Versioned id, e.g. 'Maze-v0'.")
    kind: Literal["entry_point", "image", "source"] = Field(..., description="How the env's code gets in.")
    entry_point: str = Field(..., max_length=256, description="'module:Class' inside the sandbox.")
    image: str = Field("", max_length=256, description="Docker image (kind 'image').")
    source_name: str = Field("", max_length=128, description="File name of the upload: 'mymod.py' or a .whl.")
    source_b64: str | None = Field(None, max_length=8_000_000, description="The upload, base64-encoded.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Default constructor kwargs.")
    max_steps: int | None = Field(None, ge=1, le=100_000, description="Default step limit.")
    description: str = Field("", max_length=1000)
    tags: list[str] = Field(default_factory=list, max_length=20)


class SandboxCreate(_Body):
    """Resources of a user sandbox."""

    name: str = Field("user", max_length=64, pattern=r"^[A-Za-z0-9_-]+$", description="Pool label.")
    image: str | None = Field(None, max_length=256, description="Docker image (default: rockroll's).")
    cpus: float = Field(1.0, gt=0, le=64)
    memory_mb: int = Field(512, ge=32, le=262_144)
    pids_limit: int = Field(256, ge=16, le=65_536)
    workspace_mb: int = Field(256, ge=1, le=65_536)
    network: bool = Field(False, description="Give the sandbox a network (off by default).")
    max_sessions: int = Field(16, ge=1, le=4096)


class ExecRequest(_Body):
    """A command to run in a sandbox's workspace."""

    cmd: str | list[str] = Field(..., description="A shell string, or an argv list.")
    timeout_s: float = Field(30.0, gt=0, le=600)
    cwd: str | None = Field(None, max_length=4096)
    env: dict[str, str] = Field(default_factory=dict)
    stdin: str | None = Field(None, max_length=10_000_000)
    max_output: int = Field(1_000_000, ge=1, le=16_000_000)


class SessionCreate(_Body):
    """An env session to open."""

    env: str = Field(..., min_length=1, max_length=128, description="Env id, e.g. 'FrozenLake-v0'.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Constructor kwargs.")


class ResetRequest(_Body):
    """Arguments of ``reset``."""

    seed: int | None = Field(None, ge=0, le=2**32 - 1)
    options: dict[str, Any] | None = None


class StepRequest(_Body):
    """Arguments of ``step``."""

    action: str = Field(..., max_length=100_000, description="The agent's text.")


class StateBody(_Body):
    """A snapshot to restore."""

    state: dict[str, Any] = Field(..., description="A snapshot from GET .../state.")


class BatchStepItem(_Body):
    """One item of a batch: a step with ``action``, or (``op="reset"``) a reset with ``seed``."""

    id: str = Field(..., max_length=64)
    op: Literal["step", "reset"] = "step"
    action: str = Field("", max_length=100_000)
    seed: int | None = Field(None, ge=0, le=2**32 - 1)


class BatchStepRequest(_Body):
    """Steps (or resets) on several sessions in one request (each session at most once)."""

    steps: list[BatchStepItem] = Field(..., min_length=1, max_length=1024)


class JobCreate(_Body):
    """A job to queue."""

    kind: Literal["train", "eval"]
    config: dict[str, Any] = Field(default_factory=dict, description="eval: {env, kwargs, episodes, policy, seed}.")
