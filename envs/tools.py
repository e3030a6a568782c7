"""Tools in the env contract: what a tool env declares, what a turn with tool calls is, what comes back.

An env may declare **tools** (:attr:`rockroll.envs.core.TextEnv.tools`): OpenAI function schemas, each a
:class:`Tool` (name, description, JSON-schema ``parameters``). Such an env takes a structured action, a
:class:`ToolAction`: the assistant turn's text plus zero or more :class:`ToolCall` (id, name, arguments).
Each call gets a :class:`ToolResult` tied to its id (``info["tool_results"]`` of the step); the env
decides what a turn without a call means (a final answer, or a nudge). A plain string stays a valid
action everywhere: :func:`as_tool_action` reads it as a turn of text and no call.

Everything here is plain data with ``to_dict``/``from_dict`` (JSON types only), so the same action
travels through every handle (in process, sandbox sessions over HTTP, WebSocket and batch, remote envs,
node agents, the OpenEnv face) as ``{"text": ..., "tool_calls": [...]}``.

A bad call is the agent's mistake, not an error: :func:`check_call` says what is wrong (unknown tool,
arguments that fail the schema) as text for the call's result message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rockroll.envs.errors import ActionTypeError, EnvConfigError

__all__ = [
    "Tool",
    "ToolCall",
    "ToolAction",
    "ToolResult",
    "Action",
    "as_tool_action",
    "action_to_wire",
    "action_from_wire",
    "check_tools",
    "check_call",
    "one_string",
    "MAX_CALLS_PER_TURN",
    "MAX_RESULT_CHARS",
]

#: calls one turn may make; more are the agent's mistake (each extra one answered with a note)
MAX_CALLS_PER_TURN = 8
#: characters of one result kept; a longer one is cut with a note
MAX_RESULT_CHARS = 8_000
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Tool:
    """One function an env offers: ``parameters`` is a JSON schema of its arguments (an object)."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry (what a chat template's ``tools=`` takes)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }

    @classmethod
    def from_openai(cls, d: Mapping[str, Any]) -> Tool:
        fn = d.get("function", d)
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise EnvConfigError(f"a tool needs a function with a name, got {dict(d)!r:.200}")
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        return cls(str(fn["name"]), str(fn.get("description", "")), dict(params))


@dataclass(frozen=True)
class ToolCall:
    """One call of the assistant's turn: ``arguments`` already decoded from JSON (a mapping)."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolCall:
        name, args = d.get("name"), d.get("arguments", {})
        if not isinstance(name, str) or not isinstance(args, Mapping):
            raise ActionTypeError(
                d,
                field="action.tool_calls",
                reason=f"a tool call needs a name (text) and arguments (a mapping), got {dict(d)!r:.200}",
            )
        return cls(str(d.get("id", "")), name, dict(args))


@dataclass(frozen=True)
class ToolAction:
    """An assistant turn: its text and its tool calls (none: a turn of text only).

    ``problems``: calls the agent attempted that were malformed (bad JSON, no name, ...), one line each, as a
    tool-call parser describes them: the env answers each with an error result, and a turn with problems is
    never read as a turn without a call."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"text": self.text, "tool_calls": [c.to_dict() for c in self.calls]}
        if self.problems:
            d["problems"] = list(self.problems)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolAction:
        text, calls, problems = d.get("text", ""), d.get("tool_calls") or [], d.get("problems") or []
        if not isinstance(text, str) or not isinstance(calls, Sequence) or isinstance(calls, str):
            raise ActionTypeError(d, reason="a structured action is {'text': str, 'tool_calls': [...]}")
        if (
            not isinstance(problems, Sequence)
            or isinstance(problems, str)
            or not all(isinstance(p, str) for p in problems)
        ):
            raise ActionTypeError(d, field="action.problems", reason="problems must be a list of text")
        return cls(text, tuple(ToolCall.from_dict(c) for c in calls), tuple(str(p)[:1000] for p in problems[:64]))


@dataclass(frozen=True)
class ToolResult:
    """What one call returned (``error``: the call was the agent's mistake or the tool raised)."""

    call_id: str
    name: str
    content: str
    error: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"tool_call_id": self.call_id, "name": self.name, "content": self.content, "error": self.error}

    @classmethod
    def cut(cls, call_id: str, name: str, content: str, error: bool = False) -> ToolResult:
        """A result cut to :data:`MAX_RESULT_CHARS`, with a note saying so."""
        if len(content) > MAX_RESULT_CHARS:
            content = content[:MAX_RESULT_CHARS] + f"\n[cut: {len(content) - MAX_RESULT_CHARS} more characters]"
        return cls(call_id, name, content, error)


#: what ``step`` takes: text, or a turn with tool calls
Action = str | ToolAction


def as_tool_action(action: Action | Mapping[str, Any]) -> ToolAction:
    """Any action as a :class:`ToolAction` (text: no call; a mapping: its wire form)."""
    if isinstance(action, ToolAction):
        return action
    if isinstance(action, str):
        return ToolAction(action)
    if isinstance(action, Mapping):
        return ToolAction.from_dict(action)
    raise ActionTypeError(action)


def action_to_wire(action: Action) -> str | dict[str, Any]:
    """The JSON form of an action: text as is, a tool turn as its mapping."""
    return action if isinstance(action, str) else action.to_dict()


def action_from_wire(value: object) -> Action:
    """The inverse of :func:`action_to_wire` (``ActionTypeError`` for anything else)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return ToolAction.from_dict(value)
    raise ActionTypeError(value)


def one_string(
    key: str, description: str, max_length: int | None = None, *, pattern: str | None = None
) -> dict[str, Any]:
    """The parameters of a tool taking one required string ``key``: non-empty and at most ``max_length``
    characters, or matching ``pattern`` (a regex bounding it) instead."""
    if (max_length is None) == (pattern is None):
        raise ValueError("one_string takes a max_length or a pattern, one of the two")
    bound: dict[str, Any] = {"pattern": pattern} if pattern is not None else {"minLength": 1, "maxLength": max_length}
    return {
        "type": "object",
        "properties": {key: {"type": "string", **bound, "description": description}},
        "required": [key],
        "additionalProperties": False,
    }


def check_tools(tools: Sequence[Tool]) -> None:
    """``EnvConfigError`` naming the field when a declared tool is not a valid function schema."""
    import jsonschema

    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if not _NAME.match(tool.name):
            raise EnvConfigError(f"tools[{i}].name {tool.name!r} must be letters, digits, '_', '.' or '-' (1-64)")
        if tool.name in seen:
            raise EnvConfigError(f"tools[{i}].name {tool.name!r} is declared twice")
        seen.add(tool.name)
        params = dict(tool.parameters)
        if params.get("type") != "object":
            raise EnvConfigError(f"tools[{i}].parameters must be a JSON schema of type 'object'")
        try:
            jsonschema.Draft202012Validator.check_schema(params)
        except jsonschema.SchemaError as e:
            raise EnvConfigError(f"tools[{i}].parameters is not a valid JSON schema: {e.message}") from e


def check_call(call: ToolCall, tools: Sequence[Tool]) -> str:
    """``''`` when ``call`` names a declared tool with arguments its schema accepts, else what is wrong."""
    import jsonschema

    tool = next((t for t in tools if t.name == call.name), None)
    if tool is None:
        known = ", ".join(t.name for t in tools) or "none"
        return f"unknown tool {call.name!r} (tools: {known})"
    try:
        jsonschema.validate(dict(call.arguments), dict(tool.parameters))
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "arguments"
        return f"arguments of {call.name} fail its schema at {where}: {e.message}"
    return ""
