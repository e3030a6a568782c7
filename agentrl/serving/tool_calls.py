"""Tool calls in ``rockroll serve-model``: tools into the prompt, the model's calls out as OpenAI ``tool_calls``.

The server reads calls in one style, its tool-call parser (:data:`rockroll.agentrl.tools.TOOL_PARSERS`, vLLM's
``--tool-call-parser``): ``--tool-call-parser`` names it, else the export records it (:func:`recorded_parser`:
the run's ``rollout.episode.tool_call_parser``), else ``hermes``. The conversation, with the request's
``tools``, the assistant's ``tool_calls`` and the ``tool`` results, is rendered by the model's chat template (or
the style's tiny template, :func:`rockroll.agentrl.tools.render_chat`).

What a request's ``tool_choice`` does (:func:`plan_tools`):

* ``auto`` (the default when tools are given): the tools are in the prompt; the answer is parsed.
* ``none``: as vLLM does by default, the tools stay in the prompt but the answer is never parsed (its text is
  the content, calls and all).
* ``required`` and a named function: the HF engine has no grammar-constrained decoding, so the call is forced
  by **prefilling** its opening after the generation prompt (:func:`prefill_text`): ``<tool_call>\\n{"name": "``
  for ``required``, ``<tool_call>\\n{"name": "get_weather", "arguments": `` for a named one (hermes; the same
  cut of each style's own call: ``{"name": ...`` for ``llama3_json``, ``[TOOL_CALLS][{"name": ...`` for
  ``mistral``). The model writes the rest; the prefilled text is part of the turn that is parsed and of the
  prompt's token ids (``prompt_token_ids``, usage), not of the sampled ``token_ids``/logprobs. A model that
  then writes no well-formed call gets the answer below, not an error: forced, not guaranteed.

The answer (:func:`split_turn`): when the parser finds calls and no malformed one, ``message.tool_calls`` holds
them (ids ``call_<request>_<choice>_<i>``, arguments as JSON text) with ``finish_reason: "tool_calls"``, and
``content`` is the text before the first call (trailing whitespace cut) plus the parser's text after it, or
null. A turn with any malformed call is answered as vLLM answers it: its whole raw text as ``content``, no
``tool_calls``, the engine's finish reason. ``parallel_tool_calls: false`` keeps the first call only.

Streaming (:class:`ToolStream`): text goes out as ``content`` deltas until the parser's ``marker`` (the text
that opens a call: ``<tool_call>``) appears; text that may be the start of the marker, and trailing whitespace,
is held back until the next piece decides. From the marker on, everything is held until the choice ends, then
parsed as the answer is: each call as two ``tool_calls`` deltas (index, id, type and name; then its
arguments) and a last chunk with ``finish_reason: "tool_calls"``, or the held text as content. The stream thus
says exactly what the answer says (calls are not streamed argument by argument).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rockroll.agentrl.eval.config import EPISODE_FILE
from rockroll.agentrl.serving.protocol import ChatCompletionRequest, ChatMessage
from rockroll.agentrl.tools import ToolCallParser, assistant_message, tool_message
from rockroll.agentrl.tools.base import dumps
from rockroll.envs.tools import ToolAction, ToolCall, ToolResult

__all__ = [
    "DEFAULT_PARSER",
    "EXPORT_FILE",
    "ToolPlan",
    "ToolStream",
    "chat_messages",
    "openai_tool_calls",
    "plan_tools",
    "prefill_text",
    "recorded_parser",
    "split_turn",
    "tool_call_deltas",
]

DEFAULT_PARSER = "hermes"
#: an export's provenance file (:data:`rockroll.trainer.run.export.EXPORT_MARKER`)
EXPORT_FILE = "rockroll_export.json"
_ARGS_SLOT, _NAME_SLOT = "__rockroll_arguments__", "__rockroll_name__"


def recorded_parser(model_dir: str | Path) -> str | None:
    """The tool-call parser an export records (``tool_call_parser`` of its ``rockroll_episode.json``, else of its
    ``rockroll_export.json``); None when neither names one (or is not readable JSON)."""
    for name in (EPISODE_FILE, EXPORT_FILE):
        try:
            data = json.loads((Path(model_dir) / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("tool_call_parser"), str):
            return str(data["tool_call_parser"])
    return None


def chat_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The request's messages as chat-template messages: an assistant's ``tool_calls`` with decoded arguments,
    a ``tool`` result with the name of the call it answers."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            calls = tuple(ToolCall(c.id, c.function.name, c.function.args()) for c in m.tool_calls)
            names.update({c.id: c.name for c in calls})
            out.append(assistant_message(ToolAction(m.text(), calls)))
        elif m.role == "tool":
            call = m.tool_call_id or ""
            out.append(tool_message(ToolResult(call, m.name or names.get(call, ""), m.text())))
        else:
            out.append({"role": m.role, "content": m.text()})
    return out


@dataclass(frozen=True)
class ToolPlan:
    """How one chat request treats tools (see the module docstring)."""

    tools: list[dict[str, Any]] | None = None  # OpenAI entries for the template; None: no tools
    parse: bool = False  # read calls out of the answer
    prefill: str = ""  # text after the generation prompt that opens the forced call
    parallel: bool = True  # every call of the turn (False: the first only)


def plan_tools(req: ChatCompletionRequest, parser: ToolCallParser) -> ToolPlan:
    """The :class:`ToolPlan` of ``req`` for a server reading ``parser``'s style."""
    if not req.declared:
        return ToolPlan()
    tools = [t.to_openai() for t in req.declared]
    choice = req.choice
    prefill = prefill_text(parser, req.named_tool) if choice in ("required", "named") else ""
    return ToolPlan(tools, choice != "none", prefill, req.parallel_tool_calls is not False)


def prefill_text(parser: ToolCallParser, name: str | None = None) -> str:
    """The opening of a call in ``parser``'s style, up to its arguments (``name`` given) or into its name (None):
    the style's own rendering of a call, cut there. ``""`` for a style that does not write ``{"name": ...,
    <arguments>}`` JSON (no prefill: the choice is then not forced)."""
    if name is None:
        text, slot = parser.render_call(ToolCall("", _NAME_SLOT, {})), _NAME_SLOT
    else:
        text, slot = parser.render_call(ToolCall("", name, {_ARGS_SLOT: 0})), '{"' + _ARGS_SLOT
    cut = text.find(slot)
    return text[:cut] if cut > 0 else ""


@dataclass(frozen=True)
class Split:
    """An answer's text read with the parser: its content and its calls (none: ``content`` is the raw text)."""

    content: str | None
    calls: tuple[ToolCall, ...] = ()


def split_turn(parser: ToolCallParser, text: str, *, prefix: str, index: int = 0, parallel: bool = True) -> Split:
    """The content and calls of the answer ``text`` of choice ``index`` (see the module docstring)."""
    parsed = parser.parse(text, turn=index, prefix=prefix)
    start = text.find(parser.marker)
    if not parsed.calls or parsed.problems or start < 0:
        return Split(text)
    after = parser.parse(text[start:], turn=index, prefix=prefix).text
    content = "\n".join(x for x in (text[:start].rstrip(), after) if x)
    return Split(content or None, parsed.calls if parallel else parsed.calls[:1])


def openai_tool_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """``message.tool_calls`` in OpenAI's shape (arguments as JSON text)."""
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": dumps(dict(c.arguments))}}
        for c in calls
    ]


def tool_call_deltas(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """The ``delta.tool_calls`` of a stream, one chunk's worth each: per call its index, id, type and name, then
    its arguments (what OpenAI's clients add up)."""
    out: list[dict[str, Any]] = []
    for i, c in enumerate(calls):
        out.append({"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}})
        out.append({"index": i, "function": {"arguments": dumps(dict(c.arguments))}})
    return out


def _partial_marker(text: str, marker: str) -> int:
    """How many trailing characters of ``text`` could begin ``marker``."""
    for k in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:k]):
            return k
    return 0


class ToolStream:
    """The content deltas of one streamed choice, and its calls at the end (see the module docstring).

    ``feed(text)`` takes the text each piece adds and returns the content to send now; ``finish()`` at the end
    returns the rest of the content and the calls (none: the rest of the raw text). The content sent in all is
    always what :func:`split_turn` gives the whole text. ``parse=False``: text passes through as it comes.
    """

    def __init__(self, parser: ToolCallParser, *, prefix: str, index: int = 0, plan: ToolPlan | None = None) -> None:
        self.parser, self.prefix, self.index = parser, prefix, index
        self.plan = plan or ToolPlan(parse=True)
        self.text = self.plan.prefill if self.plan.parse else ""
        self.sent = 0  # characters of ``text`` sent as content
        self.held = self.plan.parse and parser.marker in self.text  # from the marker on, all is held

    def feed(self, piece: str) -> str:
        self.text += piece
        if not self.plan.parse:
            self.sent = len(self.text)
            return piece
        if self.held:
            return ""
        start = self.text.find(self.parser.marker, self.sent)
        if start >= 0:
            self.held = True
            end = len(self.text[:start].rstrip())
        else:
            end = len(self.text) - _partial_marker(self.text, self.parser.marker)
            end = len(self.text[:end].rstrip())
        out, self.sent = self.text[self.sent : max(end, self.sent)], max(end, self.sent)
        return out

    def finish(self) -> tuple[str, tuple[ToolCall, ...]]:
        """The content still to send and the calls of the choice."""
        if not self.plan.parse:
            return "", ()
        split = split_turn(self.parser, self.text, prefix=self.prefix, index=self.index, parallel=self.plan.parallel)
        sent, self.sent = self.text[: self.sent], len(self.text)
        content = split.content or ""
        # what was sent begins every answer: the text before the marker, trailing whitespace held back
        return (content[len(sent) :] if content.startswith(sent) else ""), split.calls
