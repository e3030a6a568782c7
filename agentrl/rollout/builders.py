"""Which prompt builder an episode gets, and what a tool env's turn counts.

A text env's episode is built by :class:`~rockroll.agentrl.models.chat.PromptBuilder`; an env that declares
tools by :class:`~rockroll.agentrl.tools.prompt.ToolPromptBuilder`, with the episode's ``tool_call_parser``
(its tiny template of the same name when the tokenizer's own template cannot render tools). Both take
``add_response`` (the sampled ids; the env's action back) and ``after_step`` (the env's answer; the next
prompt back), so the env managers play either the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from rockroll.agentrl.engines.base import GenerationResult
from rockroll.agentrl.models.chat import PromptBuilder
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.tools import get_parser
from rockroll.agentrl.tools.metrics import TOOL_COUNTS
from rockroll.agentrl.tools.prompt import ToolPromptBuilder
from rockroll.envs.tools import Action, Tool

__all__ = ["make_builder", "tool_counts", "chat_result"]


def make_builder(
    tokenizer: Any, system: str, tools: Sequence[Tool], cfg: EpisodeConfig, *, chat: bool = False
) -> PromptBuilder:
    """The builder of one episode (see the module docstring). ``chat``: the engine renders the conversation
    itself (chat mode): every exchange is kept, and the prompt ids only record what was sent."""
    common: dict[str, Any] = {
        "history": "last_k" if chat else cfg.history,
        "last_k": 10**9 if chat else cfg.history_k,
        "max_context_tokens": cfg.max_context_tokens,
        "max_new_tokens": cfg.max_tokens_per_turn,
    }
    if not tools:
        return PromptBuilder(tokenizer, system, **common)
    style = cfg.tool_call_parser
    return ToolPromptBuilder(tokenizer, system, tools, get_parser(style), style=style, **common)


def tool_counts(info: Mapping[str, Any]) -> dict[str, int]:
    """A tool env's counts of one turn from its step's ``info`` (0 for those it does not report)."""
    out: dict[str, int] = {}
    for key in TOOL_COUNTS:
        value = info.get(key, 0)
        out[key] = int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
    return out


def chat_result(builder: PromptBuilder, reply: Any, tokenizer: Any, version: int) -> tuple[GenerationResult, Action]:
    """A chat server's turn (chat mode, :mod:`rockroll.agentrl.engines.chat_mode`) recorded by ``builder``: the
    env's action, and a result whose ids are the reply's text re-tokenised, logprobs unknown (NaN), not exact."""
    action = builder.add_chat_reply(reply)
    ids = list(tokenizer.encode(builder.last_text, add_special_tokens=False))
    finish: Literal["stop", "length"] = "length" if reply.finish_reason == "length" else "stop"
    nan = [float("nan")] * len(ids)
    return GenerationResult(ids, nan, finish, version, tokens_exact=False, logprobs_exact=False), action
