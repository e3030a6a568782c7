"""A step's ``action`` at the HTTP edge: the agent's text, or a turn with tool calls.

``action`` is a JSON string (the agent's text, as every client sent before tools) or
``{"text": str, "tool_calls": [{"id": str, "name": str, "arguments": {...}}]}``. It is checked by
:func:`rockroll.envs.action_wire.read_action`, the same check every other hop makes: a malformed one is
FastAPI's 422 ``validation_error`` whose message names the wrong field (``action.tool_calls[0].name``).
:class:`ToolCallBody` is the pydantic shape of one call, for request models that spell the calls out
(the OpenEnv face's action).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from rockroll.envs.action_wire import MAX_ACTION_CHARS, MAX_WIRE_CALLS, read_action
from rockroll.envs.errors import ActionTypeError
from rockroll.envs.tools import Action, ToolCall

__all__ = ["WireAction", "ToolCallBody", "ACTION_SCHEMA"]


class ToolCallBody(BaseModel):
    """One tool call of the assistant's turn (``arguments``: decoded JSON, an object)."""

    model_config = ConfigDict(extra="forbid", title="ToolCall")

    id: str = Field(default="", max_length=256, description="The call's id (its result carries it back).")
    name: str = Field(..., min_length=1, max_length=128, description="The tool called.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The call's arguments.")

    def to_call(self) -> ToolCall:
        return ToolCall(self.id, self.name, self.arguments)


_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "id": {"type": "string", "maxLength": 256},
        "name": {"type": "string", "minLength": 1, "maxLength": 128},
        "arguments": {"type": "object"},
    },
}
#: the JSON schema of a step's ``action``
ACTION_SCHEMA: dict[str, Any] = {
    "description": "The agent's text, or a turn with tool calls {text, tool_calls}.",
    "oneOf": [
        {"type": "string", "maxLength": MAX_ACTION_CHARS},
        {
            "type": "object",
            "title": "ToolAction",
            "additionalProperties": False,
            "properties": {
                "text": {"type": "string", "maxLength": MAX_ACTION_CHARS, "default": ""},
                "tool_calls": {"type": "array", "maxItems": MAX_WIRE_CALLS, "items": _CALL_SCHEMA},
            },
        },
    ],
}


def _read(value: object) -> Action:
    try:
        return read_action(value)
    except ActionTypeError as e:
        raise PydanticCustomError("invalid_action", "{reason}", {"reason": str(e), "field": e.field}) from e


#: a request model's ``action`` field: read into the agent's text or a :class:`~rockroll.envs.tools.ToolAction`
WireAction = Annotated[Action, PlainValidator(_read), WithJsonSchema(ACTION_SCHEMA)]
