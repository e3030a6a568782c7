"""Two JSON tool-call styles: Llama 3.x (``llama3_json``) and Mistral (``mistral``).

* ``llama3_json``: a turn that starts with ``{`` (after an optional ``<|python_tag|>``) is one or more calls
  ``{"name": ..., "parameters": {...}}`` (``"arguments"`` is read too, as vLLM does), separated by ``;``, and
  nothing else: the turn has no text beside its calls, and anything after the last call is a problem. Any
  other turn is text. Rendered as ``{"name": ..., "parameters": {...}}`` joined by ``"; "``; a turn's text is
  not written beside calls (Llama's own template drops it too).
* ``mistral``: the text before ``[TOOL_CALLS]`` is the turn's text; after it, one JSON list of
  ``{"name": ..., "arguments": {...}}`` (an ``"id"`` key is allowed and ignored: ids are ours). A second
  ``[TOOL_CALLS]``, something other than a list, or text after the list is a problem. Rendered as the text,
  then ``[TOOL_CALLS]`` and the list.
"""

from __future__ import annotations

from rockroll.agentrl.tools.base import (
    STRICT_DECODER,
    ParsedTurn,
    ToolCallParser,
    decode_call,
    describe_json_error,
    dumps,
    json_kind,
)
from rockroll.envs.tools import ToolAction, ToolCall

__all__ = ["Llama3JsonParser", "MistralParser", "PYTHON_TAG", "TOOL_CALLS"]

PYTHON_TAG = "<|python_tag|>"
TOOL_CALLS = "[TOOL_CALLS]"


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


class Llama3JsonParser(ToolCallParser):
    """Llama 3.x JSON calls (see the module docstring)."""

    name = "llama3_json"
    marker = "{"

    def parse(self, text: str, *, turn: int = 0, prefix: str = "call") -> ParsedTurn:
        body = text.strip()
        body = body[len(PYTHON_TAG) :].lstrip() if body.startswith(PYTHON_TAG) else body
        if not body.startswith("{"):
            return ParsedTurn(text, (), ())
        calls: list[ToolCall] = []
        problems: list[str] = []
        pos, index = 0, 0
        while pos < len(body):
            try:
                obj, pos = STRICT_DECODER.raw_decode(body, pos)
            except ValueError as e:
                problems.append(f"tool call {index + 1}: {describe_json_error(e, body)}")
                break
            call, problem = decode_call(obj, index, turn=turn, prefix=prefix, args_keys=("parameters", "arguments"))
            calls.extend([call] if call is not None else [])
            problems.extend([problem] if problem else [])
            index += 1
            pos = _skip_space(body, pos)
            if pos < len(body) and body[pos] != ";":
                problems.append(f"text after tool call {index}: expected ';' or the end, got {body[pos : pos + 20]!r}")
                break
            pos = _skip_space(body, pos + 1)
        return ParsedTurn("", tuple(calls), tuple(problems))

    def render(self, action: ToolAction) -> str:
        if not action.calls:
            return action.text
        return "; ".join(dumps({"name": c.name, "parameters": dict(c.arguments)}) for c in action.calls)


class MistralParser(ToolCallParser):
    """Mistral's ``[TOOL_CALLS]`` list (see the module docstring)."""

    name = "mistral"
    marker = TOOL_CALLS

    def parse(self, text: str, *, turn: int = 0, prefix: str = "call") -> ParsedTurn:
        start = text.find(TOOL_CALLS)
        if start == -1:
            return ParsedTurn(text, (), ())
        turn_text, rest = text[:start].strip(), text[start + len(TOOL_CALLS) :]
        problems: list[str] = []
        if TOOL_CALLS in rest:
            problems.append(f"{TOOL_CALLS} appears more than once: put every call in one list")
            rest = rest[: rest.find(TOOL_CALLS)]
        pos = _skip_space(rest, 0)
        try:
            obj, end = STRICT_DECODER.raw_decode(rest, pos)
        except ValueError as e:
            return ParsedTurn(
                turn_text, (), (f"the calls after {TOOL_CALLS}: {describe_json_error(e, rest)}", *problems)
            )
        if not isinstance(obj, list):
            problem = f"expected a JSON list of calls after {TOOL_CALLS}, got {json_kind(obj)}"
            return ParsedTurn(turn_text, (), (problem, *problems))
        calls: list[ToolCall] = []
        for index, item in enumerate(obj):
            call, problem = decode_call(item, index, turn=turn, prefix=prefix, allowed=("id",))
            calls.extend([call] if call is not None else [])
            problems.extend([problem] if problem else [])
        tail = rest[end:].strip()
        if tail:
            problems.append(f"text after the list of calls: {tail[:20]!r}")
        return ParsedTurn(turn_text, tuple(calls), tuple(problems))

    def render(self, action: ToolAction) -> str:
        if not action.calls:
            return action.text
        return (
            action.text + TOOL_CALLS + dumps([{"name": c.name, "arguments": dict(c.arguments)} for c in action.calls])
        )
