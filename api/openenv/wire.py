"""OpenEnv's wire shapes for a rockroll text env: what OpenEnv's stock client sends and reads.

OpenEnv (``openenv-core``, ``openenv.core.env_server.types``) speaks JSON frames over one WebSocket per
session, ``{"type": T, "data": {...}}``:

* in: ``reset`` (``data``: ``seed``, ``episode_id``, more keyword arguments), ``step`` (``data``: the action
  object), ``state``, ``close`` (no ``data``), ``mcp`` (``data``: a JSON-RPC request); any other key is refused;
* out: ``{"type": "observation", "data": {"observation": {...}, "reward": R, "done": D}}``,
  ``{"type": "state", "data": {...}}``, and every failure as
  ``{"type": "error", "data": {"message", "code", ...}}`` with a :class:`WSErrorCode` (``errors``: the
  validation errors of a ``VALIDATION_ERROR``).

A rockroll env's action is the agent's text, ``{"message": "<answer>Up</answer>"}`` (:class:`TextAction`,
like OpenEnv's echo and TextArena envs), and for a tool env the turn's tool calls beside it,
``{"message": "...", "tool_calls": [{"id", "name", "arguments"}]}`` (:meth:`TextAction.to_action`; the
results come back in the observation's ``info["tool_results"]``); its observation is
:class:`TextObservation`: the observation text, ``truncated`` (OpenEnv has only ``done``, which is
``terminated or truncated``) and the step's ``info``.
rockroll does not import ``openenv-core`` (it pins other versions of gradio and pillow): these models mirror
its shapes, and the tests check them against the real package (tests/api/test_openenv.py).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rockroll.api.server.action_body import ToolCallBody
from rockroll.envs.action_wire import MAX_WIRE_CALLS
from rockroll.envs.tools import Action, ToolAction

__all__ = [
    "WSErrorCode",
    "TextAction",
    "TextObservation",
    "TextState",
    "ResetData",
    "Frame",
    "ACTION_MAX_CHARS",
    "observation_data",
    "observation_frame",
    "error_frame",
    "validation_frame",
    "schemas",
]

#: the longest agent text a step takes (the same limit as rockroll's own step routes)
ACTION_MAX_CHARS = 100_000


class WSErrorCode(StrEnum):
    """OpenEnv's error codes (``openenv.core.env_server.types.WSErrorCode``)."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


class TextAction(BaseModel):
    """One step: the agent's whole text (the env reads the ``<answer>...</answer>`` in it), and the turn's tool
    calls for a tool env."""

    model_config = ConfigDict(extra="forbid", title="TextAction")

    message: str = Field(..., max_length=ACTION_MAX_CHARS, description="The agent's text, e.g. <answer>Up</answer>")
    tool_calls: list[ToolCallBody] = Field(
        default_factory=list, max_length=MAX_WIRE_CALLS, description="The turn's tool calls (a tool env's action)"
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Additional metadata for the action")

    def to_action(self) -> Action:
        """The rockroll action: the text alone, or a turn with its tool calls."""
        if not self.tool_calls:
            return self.message
        return ToolAction(self.message, tuple(c.to_call() for c in self.tool_calls))


class TextObservation(BaseModel):
    """What a reset or step shows: ``done`` and ``reward`` travel beside it (OpenEnv's ``serialize_observation``)."""

    model_config = ConfigDict(extra="forbid", title="TextObservation")

    text: str = Field(default="", description="The observation text")
    truncated: bool = Field(default=False, description="The episode hit its step limit (done without terminating)")
    info: dict[str, Any] = Field(
        default_factory=dict, description="The step's info: action_is_valid, action_is_effective, success, ..."
    )
    done: bool = Field(default=False, description="Whether the episode has ended (terminated or truncated)")
    reward: float | None = Field(default=None, description="Reward of the last action")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Additional metadata for the observation")


class TextState(BaseModel):
    """A session's ``state``: OpenEnv's ``episode_id``/``step_count`` and which rockroll env and session it is."""

    model_config = ConfigDict(extra="allow", title="TextState")

    episode_id: str | None = Field(default=None, description="Unique identifier for the current episode")
    step_count: int = Field(default=0, ge=0, description="Number of steps taken in the current episode")
    env_id: str = Field(default="", description="The rockroll env id")
    session_id: str = Field(default="", description="The rockroll session id (empty outside a WebSocket session)")


class ResetData(BaseModel):
    """A reset's ``data``: keys the env does not take are dropped, as OpenEnv drops them."""

    model_config = ConfigDict(extra="ignore")

    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    episode_id: str | None = Field(default=None, max_length=255)
    options: dict[str, Any] | None = None


class Frame(BaseModel):
    """An incoming frame's envelope: ``type`` plus ``data`` (``state``, ``close``: none)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["reset", "step", "state", "close", "mcp"]
    data: dict[str, Any] | None = None


def observation_data(
    obs: str, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]
) -> dict[str, Any]:
    """A reset's (``reward`` None) or a step's answer: ``{"observation": {text, truncated, info}, "reward", "done"}``."""
    observation = {"text": obs, "truncated": truncated, "info": info}
    return {"observation": observation, "reward": reward, "done": bool(terminated or truncated)}


def observation_frame(obs: str, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]) -> str:
    """The ``observation`` frame of a reset (``reward`` None) or a step."""
    data = observation_data(obs, reward, terminated, truncated, info)
    return json.dumps({"type": "observation", "data": data}, separators=(",", ":"))


def error_frame(code: WSErrorCode, message: str, **extra: Any) -> str:
    """OpenEnv's error frame, ``{"type": "error", "data": {"message", "code", **extra}}``."""
    return json.dumps({"type": "error", "data": {"message": message, "code": code.value, **extra}}, default=str)


def validation_frame(message: str, e: ValidationError) -> str:
    """A ``VALIDATION_ERROR`` frame listing pydantic's errors (without the input they echo back)."""
    return error_frame(WSErrorCode.VALIDATION_ERROR, message, errors=e.errors(include_url=False, include_input=False))


def schemas() -> dict[str, Any]:
    """``GET /schema``: the JSON schemas of the action, the observation and the state."""
    return {
        "action": TextAction.model_json_schema(),
        "observation": TextObservation.model_json_schema(),
        "state": TextState.model_json_schema(),
    }
