"""The model's own tool-call format: parsers chosen by name, and conversations with tools rendered its way.

* :data:`TOOL_PARSERS` / :func:`get_parser`: the tool-call parsers by style (``hermes``, ``llama3_json``,
  ``mistral``), each reading an assistant turn into ``(text, calls, problems)`` and writing calls back
  (:mod:`~rockroll.agentrl.tools.base` states the contract);
* :mod:`~rockroll.agentrl.tools.chat`: prompts with ``tools=`` through the tokenizer's chat template, or the
  style's tiny template (:mod:`rockroll.agentrl.models.tool_templates`) when it has none.

Adding a style is one module with a :class:`ToolCallParser` subclass, one registration here and (for the
tiny models) one template in ``TOOL_TEMPLATES`` under the same name.
"""

from __future__ import annotations

from rockroll.agentrl.tools.base import ParsedTurn, ToolCallParser, call_id
from rockroll.agentrl.tools.chat import (
    assistant_message,
    chat_template_for,
    completion_text,
    encode_chat,
    openai_tools,
    render_chat,
    tool_message,
)
from rockroll.envs.registries import Registry

__all__ = [
    "TOOL_PARSERS",
    "get_parser",
    "ParsedTurn",
    "ToolCallParser",
    "call_id",
    "assistant_message",
    "tool_message",
    "openai_tools",
    "chat_template_for",
    "render_chat",
    "encode_chat",
    "completion_text",
]

#: tool-call style -> "module:Class" (a :class:`ToolCallParser` subclass), imported when first asked for
TOOL_PARSERS: Registry[type[ToolCallParser]] = Registry(
    "tool-call parser",
    "tool_call_parser",
    entries={
        "hermes": "rockroll.agentrl.tools.hermes:HermesParser",
        "llama3_json": "rockroll.agentrl.tools.json_styles:Llama3JsonParser",
        "mistral": "rockroll.agentrl.tools.json_styles:MistralParser",
    },
)


def get_parser(name: str) -> ToolCallParser:
    """The parser of style ``name`` (one of :data:`TOOL_PARSERS`); an unknown name raises
    :class:`~rockroll.envs.registries.UnknownNameError` (a ``ValueError``) naming the close ones."""
    return TOOL_PARSERS.get(name)()
