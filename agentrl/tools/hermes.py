"""The Hermes / Qwen2.5 tool-call style: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks.

A turn may hold several blocks, with text around them; the turn's text is what lies outside the blocks (each
piece stripped, joined by newlines; a turn without any tag is returned exactly as written). Inside a block: one
JSON object with ``name`` and ``arguments`` (an object; missing means none). A block never closed (the turn
ended, or another ``<tool_call>`` began first) and a ``</tool_call>`` with no block open are problems, as are
the JSON faults of :func:`rockroll.agentrl.tools.base.decode_call`.

Rendered as Qwen2.5's template writes an assistant message: the text, then each call as
``<tool_call>\\n{json}\\n</tool_call>``, one per line (:data:`rockroll.agentrl.models.tool_templates.HERMES_TEMPLATE`).
"""

from __future__ import annotations

from rockroll.agentrl.tools.base import (
    ParsedTurn,
    ToolCallParser,
    decode_call,
    describe_json_error,
    dumps,
    loads_strict,
)
from rockroll.envs.tools import ToolAction, ToolCall

__all__ = ["HermesParser", "OPEN", "CLOSE"]

OPEN, CLOSE = "<tool_call>", "</tool_call>"


class HermesParser(ToolCallParser):
    """``<tool_call>`` blocks (see the module docstring)."""

    name = "hermes"
    marker = OPEN

    def parse(self, text: str, *, turn: int = 0, prefix: str = "call") -> ParsedTurn:
        if OPEN not in text and CLOSE not in text:
            return ParsedTurn(text, (), ())
        pieces: list[str] = []
        calls: list[ToolCall] = []
        problems: list[str] = []
        pos, index = 0, 0
        while pos <= len(text):
            start, stray = text.find(OPEN, pos), text.find(CLOSE, pos)
            if stray != -1 and (start == -1 or stray < start):
                pieces.append(text[pos:stray])
                problems.append(f"a {CLOSE} at character {stray} closes no {OPEN}")
                pos = stray + len(CLOSE)
                continue
            if start == -1:
                pieces.append(text[pos:])
                break
            pieces.append(text[pos:start])
            body_start = start + len(OPEN)
            end, reopen = text.find(CLOSE, body_start), text.find(OPEN, body_start)
            if end == -1 or (reopen != -1 and reopen < end):
                problems.append(f"tool call {index + 1}: {OPEN} is not closed by {CLOSE}")
                index += 1
                if reopen == -1:
                    break
                pos = reopen
                continue
            call, problem = self._decode(text[body_start:end], index, turn, prefix)
            calls.extend([call] if call is not None else [])
            problems.extend([problem] if problem else [])
            pos, index = end + len(CLOSE), index + 1
        turn_text = "\n".join(p.strip() for p in pieces if p.strip())
        return ParsedTurn(turn_text, tuple(calls), tuple(problems))

    @staticmethod
    def _decode(body: str, index: int, turn: int, prefix: str) -> tuple[ToolCall | None, str]:
        try:
            obj = loads_strict(body)
        except ValueError as e:
            return None, f"tool call {index + 1}: {describe_json_error(e, body)}"
        return decode_call(obj, index, turn=turn, prefix=prefix)

    def render(self, action: ToolAction) -> str:
        blocks = [f"{OPEN}\n{dumps({'name': c.name, 'arguments': dict(c.arguments)})}\n{CLOSE}" for c in action.calls]
        return "\n".join(([action.text] if action.text else []) + blocks)
