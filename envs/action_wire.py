"""Actions and tools as every handle's wire carries them, checked where they come in.

An action travels as :func:`rockroll.envs.tools.action_to_wire` writes it: the agent's text as a JSON string
(what every client sent before tools existed), a turn with tool calls as
``{"text": str, "tool_calls": [{"id": str, "name": str, "arguments": {...}}, ...]}``. :func:`read_action`
reads one back at each edge that takes actions from outside (the in-sandbox server, the node agent's data
plane, the control plane's WebSocket): a malformed one raises :class:`~rockroll.envs.errors.ActionTypeError`
whose ``field`` names the part that is wrong (``action.tool_calls[1].arguments``), which the control plane
answers as a 4xx naming it. Whether a call names a declared tool with valid arguments is the env's business
(the agent's mistake, answered in the call's result), not the wire's.

An env's tools travel as OpenAI function schemas (:meth:`~rockroll.envs.tools.Tool.to_openai`) in a
session's open answer; :func:`tools_to_wire` and :func:`tools_from_wire` convert them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rockroll.envs.errors import ActionTypeError
from rockroll.envs.tools import Action, Tool, ToolAction, ToolCall

__all__ = [
    "MAX_ACTION_CHARS",
    "MAX_WIRE_CALLS",
    "read_action",
    "wire_action",
    "tools_of",
    "tools_to_wire",
    "tools_from_wire",
]

#: the longest text (and serialised arguments of one call) an action may carry
MAX_ACTION_CHARS = 100_000
#: the most tool calls one action may carry on the wire (the env answers those past its own cap as mistakes)
MAX_WIRE_CALLS = 64
_MAX_ID_CHARS = 256
_MAX_NAME_CHARS = 128
_TURN_KEYS = frozenset({"text", "tool_calls"})
_CALL_KEYS = frozenset({"id", "name", "arguments"})


def _bad(value: object, field: str, reason: str) -> ActionTypeError:
    return ActionTypeError(value, field=field, reason=f"{field}: {reason}")


def _read_call(raw: object, field: str, max_chars: int) -> ToolCall:
    if not isinstance(raw, Mapping):
        raise _bad(raw, field, "a tool call is an object {id, name, arguments}")
    extra = sorted(str(k) for k in raw if k not in _CALL_KEYS)
    if extra:
        raise _bad(raw, f"{field}.{extra[0]}", "not a field of a tool call (id, name, arguments)")
    call_id, name, args = raw.get("id", ""), raw.get("name"), raw.get("arguments", {})
    if not isinstance(call_id, str) or len(call_id) > _MAX_ID_CHARS:
        raise _bad(call_id, f"{field}.id", f"must be a string of at most {_MAX_ID_CHARS} characters")
    if not isinstance(name, str) or not 1 <= len(name) <= _MAX_NAME_CHARS:
        raise _bad(name, f"{field}.name", f"must be a string of 1 to {_MAX_NAME_CHARS} characters")
    if not isinstance(args, Mapping):
        raise _bad(args, f"{field}.arguments", "must be an object (the call's arguments, decoded)")
    try:
        size = len(json.dumps(args))
    except (TypeError, ValueError, RecursionError) as e:
        raise _bad(args, f"{field}.arguments", f"must be plain JSON: {e}") from e
    if size > max_chars:
        raise _bad(args, f"{field}.arguments", f"is {size} characters of JSON, over the limit of {max_chars}")
    return ToolCall(call_id, name, dict(args))


def read_action(value: object, *, max_chars: int = MAX_ACTION_CHARS, field: str = "action") -> Action:
    """``value`` (a wire action, or an :data:`~rockroll.envs.tools.Action` already) as an action, checked.

    Raises :class:`~rockroll.envs.errors.ActionTypeError` naming the wrong ``field`` (see the module docstring).
    """
    if isinstance(value, str):
        if len(value) > max_chars:
            raise _bad(value, field, f"the text is {len(value)} characters, over the limit of {max_chars}")
        return value
    if isinstance(value, ToolAction):
        value = value.to_dict()
    if not isinstance(value, Mapping):
        raise _bad(value, field, "an action is the agent's text (a string) or {text, tool_calls}")
    extra = sorted(str(k) for k in value if k not in _TURN_KEYS)
    if extra:
        raise _bad(value, f"{field}.{extra[0]}", "not a field of an action (text, tool_calls)")
    text, calls = value.get("text", ""), value.get("tool_calls")
    if not isinstance(text, str) or len(text) > max_chars:
        raise _bad(text, f"{field}.text", f"must be a string of at most {max_chars} characters")
    if calls is None:
        calls = []
    if not isinstance(calls, Sequence) or isinstance(calls, (str, bytes)) or len(calls) > MAX_WIRE_CALLS:
        raise _bad(calls, f"{field}.tool_calls", f"must be a list of at most {MAX_WIRE_CALLS} tool calls")
    return ToolAction(text, tuple(_read_call(c, f"{field}.tool_calls[{i}]", max_chars) for i, c in enumerate(calls)))


def wire_action(value: object, *, max_chars: int = MAX_ACTION_CHARS, field: str = "action") -> str | dict[str, Any]:
    """``value`` checked by :func:`read_action`, in its wire form again (for a hop that forwards it as JSON)."""
    action = read_action(value, max_chars=max_chars, field=field)
    return action if isinstance(action, str) else action.to_dict()


def tools_of(env: object) -> tuple[Tool, ...]:
    """The tools ``env`` declares (``()`` for an env, or an env-shaped object, without any)."""
    found = getattr(env, "tools", ())
    return tuple(t for t in found if isinstance(t, Tool)) if isinstance(found, (tuple, list)) else ()


def tools_to_wire(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The tools as OpenAI function schemas (what a session's open answer carries)."""
    return [t.to_openai() for t in tools]


def tools_from_wire(value: object) -> tuple[Tool, ...]:
    """The tools of an open answer (``()`` for none; entries that are no function schema are skipped)."""
    if not isinstance(value, list):
        return ()
    out: list[Tool] = []
    for entry in value:
        if isinstance(entry, Mapping):
            try:
                out.append(Tool.from_openai(entry))
            except ValueError:  # EnvConfigError: not a function schema
                continue
    return tuple(out)
