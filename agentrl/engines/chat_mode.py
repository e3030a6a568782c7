"""Chat mode: an engine that plays through a server's ``/v1/chat/completions`` (messages and tools in, the
server's own parsed ``tool_calls`` out), for playing and evaluating against any OpenAI-compatible server.

The server renders the conversation with its own chat template and reads the tool calls with its own parser
(vLLM's ``--tool-call-parser``), so the sampled token ids are not known: a :class:`ChatReply`'s ids are the
reply's text re-tokenised locally and its logprobs NaN, marked ``tokens_exact=False``. Such turns are for
playing and evaluation, never for training (:meth:`rockroll.agentrl.trajectory.Trajectory.to_samples` refuses
them). An engine with :attr:`ChatEngine.chat_mode` set is played by the env managers through :meth:`chat`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from rockroll.agentrl.engines.base import EngineError, SamplingParams
from rockroll.envs.tools import Tool, ToolCall

__all__ = ["ChatReply", "ChatEngine", "is_chat_engine", "reply_from_choice", "chat_messages_for_server"]


@dataclass(frozen=True)
class ChatReply:
    """One assistant turn as a chat server answered it."""

    text: str
    calls: tuple[ToolCall, ...]
    problems: tuple[str, ...]  # tool calls the server returned that were not readable (arguments not JSON, ...)
    finish_reason: str  # the server's: stop, length, tool_calls


@runtime_checkable
class ChatEngine(Protocol):
    chat_mode: bool

    async def chat(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Tool], params: SamplingParams
    ) -> ChatReply: ...


def is_chat_engine(engine: object) -> bool:
    """Whether the env managers must play ``engine`` through :meth:`ChatEngine.chat`."""
    return bool(getattr(engine, "chat_mode", False))


def chat_messages_for_server(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages in OpenAI's wire shape: an assistant's call arguments as JSON text (Hugging Face templates
    take a mapping; the API takes a string)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        msg = dict(m)
        if msg.get("tool_calls"):
            msg["tool_calls"] = [
                {
                    "id": c.get("id", ""),
                    "type": "function",
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": json.dumps(c["function"].get("arguments", {}), ensure_ascii=False)
                        if not isinstance(c["function"].get("arguments"), str)
                        else c["function"]["arguments"],
                    },
                }
                for c in msg["tool_calls"]
            ]
            msg["content"] = msg.get("content") or None
        out.append(msg)
    return out


def reply_from_choice(choice: Any) -> ChatReply:
    """A :class:`ChatReply` from ``choices[0]`` of a chat completion (``EngineError`` when malformed)."""
    if not isinstance(choice, Mapping) or not isinstance(choice.get("message"), Mapping):
        raise EngineError(f"malformed chat completion choice: {str(choice)[:300]}")
    message = choice["message"]
    calls: list[ToolCall] = []
    problems: list[str] = []
    for i, raw in enumerate(message.get("tool_calls") or []):
        fn = raw.get("function") if isinstance(raw, Mapping) else None
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if not isinstance(name, str):
            problems.append(f"tool call {i + 1}: the server returned no function name")
            continue
        args_text = fn.get("arguments") or "{}"  # type: ignore[union-attr]
        try:
            args = json.loads(args_text) if isinstance(args_text, str) else args_text
        except ValueError as e:
            problems.append(f"tool call {i + 1}: arguments are not valid JSON ({e})")
            continue
        if not isinstance(args, Mapping):
            problems.append(f"tool call {i + 1}: arguments must be a JSON object")
            continue
        calls.append(ToolCall(str(raw.get("id") or f"call_{i}"), name, dict(args)))
    text = message.get("content") or ""
    return ChatReply(str(text), tuple(calls), tuple(problems), str(choice.get("finish_reason") or "stop"))
