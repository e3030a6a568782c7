"""Conversations with tools rendered through the tokenizer's chat template (``tools=``), with a fallback.

Messages are Hugging Face chat messages: ``{"role", "content"}``, an assistant message with ``tool_calls``
(:func:`assistant_message`, from a :class:`~rockroll.envs.tools.ToolAction`), a ``tool`` message per result
(:func:`tool_message`, from a :class:`~rockroll.envs.tools.ToolResult`). :func:`render_chat` renders them with
``tools=[t.to_openai() ...]`` through ``tokenizer.apply_chat_template`` when the tokenizer's template can
render tools; otherwise (no template, as :class:`~rockroll.agentrl.models.char_tokenizer.CharTokenizer`; or a
template that never mentions tools, as the tiny ChatML one) through the tiny template of the style
(:data:`~rockroll.agentrl.models.tool_templates.TOOL_TEMPLATES`), with the same Jinja settings as Hugging Face
(``trim_blocks``, ``lstrip_blocks``, its ``tojson``), so both paths give the same text.

:func:`completion_text` is what the template writes for an assistant turn after the generation prompt, up to
and including the stop token: the tokens a policy samples for that turn (a warm start's demonstration), and
the text by which full-history prompts extend each other.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from rockroll.agentrl.models.tool_templates import TOOL_TEMPLATES
from rockroll.envs.tools import Tool, ToolAction, ToolResult

__all__ = [
    "assistant_message",
    "tool_message",
    "openai_tools",
    "chat_template_for",
    "render_chat",
    "encode_chat",
    "completion_text",
]

Message = Mapping[str, Any]


def assistant_message(action: ToolAction | str) -> dict[str, Any]:
    """The assistant message of a turn: its text as ``content``, its calls as OpenAI-shaped ``tool_calls``
    (arguments a mapping, as Hugging Face templates expect)."""
    if isinstance(action, str):
        return {"role": "assistant", "content": action}
    msg: dict[str, Any] = {"role": "assistant", "content": action.text}
    if action.calls:
        msg["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": dict(c.arguments)}}
            for c in action.calls
        ]
    return msg


def tool_message(result: ToolResult) -> dict[str, Any]:
    """The ``tool`` message answering one call."""
    return {"role": "tool", "tool_call_id": result.call_id, "name": result.name, "content": result.content}


def openai_tools(tools: Sequence[Tool | Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """``tools=`` for a chat template: each :class:`Tool` as its OpenAI entry (mappings kept as they are)."""
    return [t.to_openai() if isinstance(t, Tool) else dict(t) for t in tools or ()]


def _uses_tools(messages: Sequence[Message], tools: Sequence[Any]) -> bool:
    return bool(tools) or any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


def chat_template_for(tokenizer: Any, style: str = "hermes", *, tools: bool = True) -> str | None:
    """The tokenizer's own template when it can render this conversation, else ``None`` (the style's tiny
    template renders it). ``tools``: the conversation has tools, calls or results. Unknown styles raise
    ``ValueError``."""
    if style not in TOOL_TEMPLATES:
        raise ValueError(f"no tiny chat template for tool-call style {style!r}: one of {', '.join(TOOL_TEMPLATES)}")
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, Mapping):  # named templates: the tool one, else the default
        template = template.get("tool_use") or template.get("default")
    if not isinstance(template, str) or not template.strip():
        return None
    if tools and "tool" not in template:
        return None
    return template


def render_chat(
    tokenizer: Any,
    messages: Sequence[Message],
    tools: Sequence[Tool | Mapping[str, Any]] | None = None,
    *,
    style: str = "hermes",
    add_generation_prompt: bool = True,
) -> str:
    """The prompt text of ``messages`` with ``tools`` (see the module docstring)."""
    tool_list = openai_tools(tools)
    msgs = [dict(m) for m in messages]
    template = chat_template_for(tokenizer, style, tools=_uses_tools(msgs, tool_list))
    if template is not None:
        return str(
            tokenizer.apply_chat_template(
                msgs, tools=tool_list or None, tokenize=False, add_generation_prompt=add_generation_prompt
            )
        )
    return _compiled(TOOL_TEMPLATES[style]).render(
        messages=msgs, tools=tool_list or None, add_generation_prompt=add_generation_prompt
    )


def encode_chat(
    tokenizer: Any,
    messages: Sequence[Message],
    tools: Sequence[Tool | Mapping[str, Any]] | None = None,
    *,
    style: str = "hermes",
    add_generation_prompt: bool = True,
) -> list[int]:
    """The prompt's token ids (:func:`render_chat`, encoded without added special tokens)."""
    text = render_chat(tokenizer, messages, tools, style=style, add_generation_prompt=add_generation_prompt)
    return list(tokenizer.encode(text, add_special_tokens=False))


def completion_text(
    tokenizer: Any,
    messages: Sequence[Message],
    action: ToolAction | str,
    tools: Sequence[Tool | Mapping[str, Any]] | None = None,
    *,
    style: str = "hermes",
) -> str:
    """What the template writes for the assistant turn ``action`` after ``messages``' generation prompt, up to
    and including the tokenizer's stop token (``eos_token``). ``ValueError`` when the template does not begin an
    assistant turn with its generation prompt (its prompts could not extend each other)."""
    prompt = render_chat(tokenizer, messages, tools, style=style, add_generation_prompt=True)
    full = render_chat(
        tokenizer, [*messages, assistant_message(action)], tools, style=style, add_generation_prompt=False
    )
    if not full.startswith(prompt):
        raise ValueError("the chat template does not begin an assistant turn with its generation prompt")
    tail = full[len(prompt) :]
    eos = getattr(tokenizer, "eos_token", None)
    if isinstance(eos, str) and eos and eos in tail:
        return tail[: tail.index(eos) + len(eos)]
    return tail


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    """Hugging Face's ``tojson`` filter (no HTML escaping, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise(message: str) -> None:
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


@functools.lru_cache(maxsize=8)
def _compiled(template: str) -> Any:
    """``template`` compiled in a sandboxed Jinja environment set up as Hugging Face's."""
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    return env.from_string(template)
