"""The tool-call parser contract: decoded assistant text in, ``(text, calls, problems)`` out; calls rendered back.

A :class:`ToolCallParser` reads one assistant turn the way one family of models writes tool calls (its
``name`` is the style, as in vLLM's ``--tool-call-parser``) and returns a :class:`ParsedTurn`: the turn's text,
the calls it makes (:class:`rockroll.envs.tools.ToolCall`, arguments decoded) and the problems it has. A
malformed call (bad JSON, no name, arguments that are not an object, keys the style does not have, a tag never
closed) is the agent's mistake: it is left out of ``calls`` and described in ``problems``, in words the agent
can read in a result message; parsing never raises on model output. Whether a call names a declared tool and
fits its schema is the env's check (:func:`rockroll.envs.tools.check_call`), not the parser's.

Call ids are deterministic: ``{prefix}_{turn}_{i}``, ``i`` the call's 0-based position among the turn's
attempted calls (a malformed one keeps its number), so a replay gives the same ids. The other way round,
:meth:`ToolCallParser.render` writes a turn (text and calls) as the model should have written it: the
warm start's demonstrations from an expert's calls, and what the style's chat template renders for an
assistant message.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from typing import Any, ClassVar, NamedTuple

from rockroll.envs.tools import ToolAction, ToolCall

__all__ = [
    "ParsedTurn",
    "ToolCallParser",
    "call_id",
    "decode_call",
    "loads_strict",
    "STRICT_DECODER",
    "dumps",
    "describe_json_error",
    "json_kind",
]


class ParsedTurn(NamedTuple):
    """One parsed assistant turn; unpacks as ``text, calls, problems``."""

    text: str  # the turn's text, calls taken out
    calls: tuple[ToolCall, ...]  # the well-formed calls, in order
    problems: tuple[str, ...]  # what was wrong with the other attempted calls, one line each

    @property
    def action(self) -> ToolAction:
        """The turn as an env action: its text, its well-formed calls and the problems of the others."""
        return ToolAction(self.text, self.calls, self.problems)

    @property
    def ok(self) -> bool:
        """No problem: every attempted call was well formed."""
        return not self.problems


def call_id(turn: int, index: int, prefix: str = "call") -> str:
    """The id of the ``index``-th (0-based) attempted call of turn ``turn``: ``call_3_0``."""
    return f"{prefix}_{turn}_{index}"


def dumps(value: Any) -> str:
    """JSON the way chat templates' ``tojson`` writes it (``", "`` and ``": "`` separators, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_strict(text: str) -> Any:
    """``json.loads`` that also refuses ``NaN``/``Infinity`` (not JSON, and not writable back as JSON)."""
    return json.loads(text, parse_constant=_reject_constant)


#: a decoder for calls written one after another (``raw_decode``), with the same refusal
STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def describe_json_error(err: ValueError, text: str) -> str:
    """``"not valid JSON (Expecting ',' delimiter at character 23: ...)"`` for the agent to read."""
    if isinstance(err, json.JSONDecodeError):
        near = text[err.pos : err.pos + 20]
        return f"not valid JSON ({err.msg} at character {err.pos}{f' near {near!r}' if near else ''})"
    return f"not valid JSON ({err})"


def decode_call(
    obj: object,
    index: int,
    *,
    turn: int,
    prefix: str,
    args_keys: tuple[str, ...] = ("arguments",),
    allowed: Collection[str] = (),
) -> tuple[ToolCall | None, str]:
    """``(call, "")`` from a decoded JSON value, or ``(None, problem)``.

    ``args_keys``: the keys the style writes arguments under (at most one may appear; none: no arguments);
    ``allowed``: other keys the style may write (ignored). Anything else is an unknown key.
    """
    where = f"tool call {index + 1}"
    if not isinstance(obj, Mapping):
        return None, f"{where}: expected a JSON object with a name and arguments, got {json_kind(obj)}"
    unknown = sorted(set(obj) - {"name", *args_keys, *allowed})
    if unknown:
        return None, f"{where}: unknown key(s) {', '.join(repr(k) for k in unknown)}"
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, f'{where}: "name" must be the tool\'s name (non-empty text), got {json_kind(name)}'
    present = [k for k in args_keys if k in obj]
    if len(present) > 1:
        return None, f"{where}: arguments given twice ({' and '.join(repr(k) for k in present)})"
    args = obj[present[0]] if present else {}
    if not isinstance(args, Mapping):
        key = present[0] if present else args_keys[0]
        return None, f'{where}: "{key}" must be a JSON object, got {json_kind(args)}'
    return ToolCall(call_id(turn, index, prefix), name, dict(args)), ""


def json_kind(value: object) -> str:
    if value is None:
        return "null"
    kinds = {bool: "a boolean", str: "text", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return next((v for k, v in kinds.items() if isinstance(value, k)), type(value).__name__)


class ToolCallParser(ABC):
    """Reads and writes one style's tool calls (see the module docstring). Parsers keep no state."""

    #: the style's name, as registered in :data:`rockroll.agentrl.tools.TOOL_PARSERS`
    name: ClassVar[str]
    #: the text that opens a call in this style (a stream can hold back text from here)
    marker: ClassVar[str]

    @abstractmethod
    def parse(self, text: str, *, turn: int = 0, prefix: str = "call") -> ParsedTurn:
        """The turn's text, calls (ids :func:`call_id` ``(turn, i, prefix)``) and problems; never raises."""

    @abstractmethod
    def render(self, action: ToolAction) -> str:
        """The turn as this style's model writes it (the stop token not included)."""

    def render_call(self, call: ToolCall) -> str:
        """One call alone, written this style's way."""
        return self.render(ToolAction("", (call,)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
