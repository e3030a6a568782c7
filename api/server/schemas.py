"""Request bodies of the HTTP API (pydantic, ``extra="forbid"``, every field bounded)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, SkipValidation, Tag, create_model, field_validator

from rockroll.agentrl.eval.config import EvalConfig
from rockroll.api.server.action_body import WireAction
from rockroll.envs.config import ConfigModel, OneOf
from rockroll.envs.play import POLICIES
from rockroll.sandbox.base import SandboxSpec
from rockroll.trainer.run.jobs import TrainJobConfig

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
    "JobKind",
    "PolicyEvalConfig",
    "EvalJobConfig",
    "is_model_eval",
]

_ID = r"^(?:[A-Za-z0-9_.\-]{1,128}/)?[A-Za-z][A-Za-z0-9_.]*-v\d+$"  # [owner/]Name-vN


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnvCreate(_Body):
    """A custom env to register (see :mod:`rockroll.api.envs.catalog` for the kinds)."""

    id: str = Field(
        ...,
        max_length=128,
        pattern=_ID,
        description="Versioned id, e.g. 'Maze-v0': stored in the caller's namespace ('alice/Maze-v0').",
    )
    kind: Literal["entry_point", "image", "source"] = Field(..., description="How the env's code gets in.")
    entry_point: str = Field(..., max_length=256, description="'module:Class' inside the sandbox.")
    image: str = Field(default="", max_length=256, description="Docker image (kind 'image').")
    source_name: str = Field(default="", max_length=128, description="File name of the upload: 'mymod.py' or a .whl.")
    source_b64: str | None = Field(default=None, max_length=8_000_000, description="The upload, base64-encoded.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Default constructor kwargs.")
    max_steps: int | None = Field(default=None, ge=1, le=100_000, description="Default step limit.")
    description: str = Field(default="", max_length=1000)
    tags: list[str] = Field(default_factory=list, max_length=20)
    visibility: Literal["private", "public"] = Field(
        default="private", description="private: its owner (and admins) only; public: everyone sees and uses it."
    )


def _spec_fields(*names: str, **defaults: Any) -> dict[str, Any]:
    """``SandboxSpec``'s fields ``names`` (type, bounds, description), with other ``defaults``."""
    out: dict[str, Any] = {}
    for name in names:
        f = SandboxSpec.model_fields[name]
        tp = Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation
        out[name] = (tp, Field(default=defaults.get(name, f.default), description=f.description))
    return out


#: Resources of a user sandbox: the fields of :class:`rockroll.sandbox.base.SandboxSpec` a caller may set.
SandboxCreate = create_model(
    "SandboxCreate",
    __base__=_Body,
    __doc__="Resources of a user sandbox (the caller-settable fields of SandboxSpec).",
    ttl_s=(
        float | None,
        Field(
            default=None,
            gt=0,
            le=30 * 86_400,
            description="Lifetime in seconds: the server stops the sandbox this long after creating it (default and "
            "cap: the server's sandbox_ttl_s and max_sandbox_ttl_s).",
        ),
    ),  # fmt: skip
    **_spec_fields(
        "name", "image", "cpus", "memory_mb", "pids_limit", "workspace_mb", "network", "max_sessions", name="user"
    ),
)


class ExecRequest(_Body):
    """A command to run in a sandbox's workspace."""

    cmd: str | list[str] = Field(..., description="A shell string, or an argv list.")
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    cwd: str | None = Field(default=None, max_length=4096)
    env: dict[str, str] = Field(default_factory=dict)
    stdin: str | None = Field(default=None, max_length=10_000_000)
    max_output: int = Field(default=1_000_000, ge=1, le=16_000_000)


class SessionCreate(_Body):
    """An env session to open."""

    env: str = Field(..., min_length=1, max_length=128, description="Env id, e.g. 'FrozenLake-v0'.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Constructor kwargs.")
    group: str = Field(
        default="",
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:-]*$",
        description="Rollout group this session serves: the group's sessions are spread over node agents first "
        "(a group survives one node's loss).",
    )
    avoid_nodes: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Node agents to stay off when another has room (e.g. a hedged copy of a stalled episode).",
    )

    @field_validator("avoid_nodes")
    @classmethod
    def _node_ids(cls, value: list[str]) -> list[str]:
        for node in value:
            if not 1 <= len(node) <= 64 or not node.replace("-", "").replace("_", "").isalnum():
                raise ValueError(f"a node id is 1-64 letters, digits, '-' or '_', got {node[:70]!r}")
        return value


class ResetRequest(_Body):
    """Arguments of ``reset``."""

    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    options: dict[str, Any] | None = None


class StepRequest(_Body):
    """Arguments of ``step``."""

    action: WireAction = Field(..., description="The agent's text, or a turn with tool calls {text, tool_calls}.")


class StateBody(_Body):
    """A snapshot to restore."""

    state: dict[str, Any] = Field(..., description="A snapshot from GET .../state.")


class BatchStepItem(_Body):
    """One item of a batch: a step with ``action``, or (``op="reset"``) a reset with ``seed``."""

    id: str = Field(..., max_length=64)
    op: Literal["step", "reset"] = "step"
    action: WireAction = Field(default="", description="A step's action (as in a single step).")
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)


class BatchStepRequest(_Body):
    """Steps (or resets) on several sessions in one request (each session at most once)."""

    steps: list[BatchStepItem] = Field(..., min_length=1, max_length=1024)


class PolicyEvalConfig(ConfigModel):
    """An ``eval`` job without a model: a built-in policy plays one env in a sandboxed session."""

    env: str = Field(..., min_length=1, max_length=128, description="env id, e.g. FrozenLake-v0")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="env constructor kwargs")
    episodes: int = Field(default=10, ge=1, le=100_000, description="episodes, on seeds seed, seed+1, ...")
    policy: Annotated[str, OneOf(POLICIES)] = Field(default="random", description="the policy that plays")
    seed: int = Field(default=0, ge=0, description="seed of the first episode")


def is_model_eval(config: Any) -> bool:
    """Whether an eval job config runs a model (``engine``/``envs`` keys) rather than a built-in policy."""
    if isinstance(config, BaseModel):
        return isinstance(config, EvalConfig)
    return isinstance(config, dict) and ("engine" in config or "envs" in config)


#: the config of an ``eval`` job: a model eval (the YAML of ``rockroll eval``) or a built-in policy's
EvalJobConfig = Annotated[
    Annotated[EvalConfig, Tag("model")] | Annotated[PolicyEvalConfig, Tag("policy")],
    Discriminator(lambda c: "model" if is_model_eval(c) else "policy"),
]
JobKind = Literal["train", "eval"]


class JobCreate(_Body):
    """A job to queue; ``config`` is validated when the job is submitted (400 ``invalid_job`` naming the key)."""

    kind: JobKind = Field(..., description="train: rockroll train's pipeline; eval: a model or a policy on envs")
    config: SkipValidation[TrainJobConfig | EvalConfig | PolicyEvalConfig] = Field(  # type: ignore[assignment]
        default_factory=dict,
        description="train: a TrainConfig mapping (plus config_path, overrides); eval: an EvalConfig mapping "
        "(engine, envs...) or {env, kwargs, episodes, policy, seed}. Paths are relative to the owner's job "
        "directory (422 job_path otherwise); URLs must match the server's job_engine_urls (422 job_url)",
    )
