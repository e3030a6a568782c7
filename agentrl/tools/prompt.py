"""Prompts of a tool env's episode, turn after turn: calls parsed from the sampled tokens, results as tool messages.

:class:`ToolPromptBuilder` is :class:`~rockroll.agentrl.models.chat.PromptBuilder` for an env that declares
tools. The conversation is rendered by :func:`~rockroll.agentrl.tools.chat.render_chat` with ``tools=`` (the
tokenizer's template, or the style's tiny one); each response is decoded and read by the episode's tool-call
parser into the env's action (:class:`~rockroll.envs.tools.ToolAction`: text, calls, and the problems of
malformed calls); the step's ``info["tool_results"]`` come back as ``tool`` messages, and an observation that
says more than its results (a nudge after a turn without a call, a text env's answer) as a ``user`` message.

Token-in/token-out holds as in the text builder: in ``full`` history each prompt is the previous prompt, the
response tokens exactly as sampled, then the tokens of what the template adds after the assistant turn (the end
of that turn after the stop token, the tool and user messages, the generation prompt). That text is found by
rendering the conversation with and without the new messages, the assistant turn written from its parsed calls,
so a model that writes its JSON its own way is trained on its own tokens, never on a re-rendered turn. Tool
results are prompt tokens of the next turn: :meth:`~rockroll.agentrl.trajectory.Trajectory.to_samples` masks
them out of the loss. A template whose renderings do not extend each other falls back to re-rendering the
whole prompt (``extends_previous = False``, the ``per_turn`` layout), as in the text builder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rockroll.agentrl.models.chat import HistoryMode, ObservationFormat, PromptBuilder, format_observation
from rockroll.agentrl.tools.base import ToolCallParser
from rockroll.agentrl.tools.chat import assistant_message, render_chat
from rockroll.envs.tool_env import render_results
from rockroll.envs.tools import Tool, ToolAction, ToolResult

__all__ = ["ToolPromptBuilder", "step_messages"]

Message = dict[str, Any]


def step_messages(observation: str, info: Mapping[str, Any]) -> list[Message]:
    """The messages a step answers with: one ``tool`` message per result, then the observation as a ``user``
    message unless it only repeats the results (:func:`~rockroll.envs.tool_env.render_results`)."""
    raw = info.get("tool_results") or []
    results = [
        ToolResult(
            str(r.get("tool_call_id", "")), str(r.get("name", "")), str(r.get("content", "")), bool(r.get("error"))
        )
        for r in raw
        if isinstance(r, Mapping)
    ]
    msgs: list[Message] = [
        {"role": "tool", "tool_call_id": r.call_id, "name": r.name, "content": r.content} for r in results
    ]
    if not results or observation.strip() != render_results(results).strip():
        msgs.append({"role": "user", "content": observation})
    return msgs


class ToolPromptBuilder(PromptBuilder):
    """Builds each turn's prompt ids for one episode of a tool env (see the module docstring).

    Args:
        tokenizer, system_prompt, history, last_k, max_context_tokens, max_new_tokens: as
            :class:`~rockroll.agentrl.models.chat.PromptBuilder`.
        tools: the env's tools (rendered into every prompt).
        parser: the tool-call parser of the model's style.
        style: its tiny template's name, for tokenizers whose template cannot render tools.
    """

    def __init__(
        self,
        tokenizer: Any,
        system_prompt: str,
        tools: Sequence[Tool],
        parser: ToolCallParser,
        *,
        style: str = "hermes",
        history: HistoryMode = "full",
        last_k: int = 2,
        max_context_tokens: int | None = None,
        max_new_tokens: int = 64,
    ) -> None:
        super().__init__(
            tokenizer,
            system_prompt,
            history=history,
            last_k=last_k,
            max_context_tokens=max_context_tokens,
            max_new_tokens=max_new_tokens,
        )
        self.tools = tuple(tools)
        self.parser = parser
        self.style = style
        self.turn = 0
        self.messages: list[Message] = list(self.system)  # full mode: every message up to the pending ones
        self.pending: list[Message] = []  # the messages the next response answers
        self.tool_exchanges: list[tuple[list[Message], Message]] = []  # (inputs, assistant message)

    def _render_msgs(self, messages: list[Message], generation_prompt: bool = True) -> str:
        return render_chat(
            self.tokenizer, messages, self.tools, style=self.style, add_generation_prompt=generation_prompt
        )

    # ----------------------------------------------------------------- API
    def first_prompt(self, observation: str) -> list[int]:
        self.pending_obs = observation
        self.pending = [{"role": "user", "content": observation}]
        if self.history == "last_k":
            return self._last_k_prompt()
        self._rendered = self._render_msgs(self.messages + self.pending)
        self.ids = self._encode(self._rendered)
        self.text = self._rendered
        self._check_budget(len(self.ids))
        return list(self.ids)

    def add_response(self, response_ids: list[int]) -> ToolAction:  # type: ignore[override]
        """Record the model's response; return the env's action: its parsed text, calls and problems."""
        content = self.tokenizer.decode(response_ids, skip_special_tokens=True)
        parsed = self.parser.parse(content, turn=self.turn)
        self.turn += 1
        self.last_text = content
        # a turn with a malformed call stays the model's own text (its calls cannot be written back)
        reply = {"role": "assistant", "content": content} if parsed.problems else assistant_message(parsed.action)
        self.tool_exchanges.append((self.pending, reply))
        self._append_response(response_ids)
        return parsed.action

    def chat_messages(self) -> list[Message]:
        """The conversation as messages, for an engine that renders it itself (chat mode)."""
        msgs = list(self.system)
        for inputs, reply in self.tool_exchanges:
            msgs += [*inputs, reply]
        return msgs + self.pending

    def add_chat_reply(self, reply: Any) -> ToolAction:  # type: ignore[override]
        """Record a chat server's reply (:class:`~rockroll.agentrl.engines.chat_mode.ChatReply`: calls parsed by
        the server); the env's action back."""
        action = ToolAction(str(reply.text), tuple(reply.calls), tuple(reply.problems))
        self.turn += 1
        self.last_text = action.text
        self.tool_exchanges.append((self.pending, assistant_message(action)))
        return action

    def after_step(self, step: tuple[Any, ...], observation_format: ObservationFormat = "raw") -> list[int]:
        observation, info = str(step[0]), step[4]
        msgs = step_messages(observation, info if isinstance(info, Mapping) else {})
        if msgs and msgs[-1]["role"] == "user":
            msgs[-1]["content"] = format_observation(msgs[-1]["content"], observation_format)
        return self.next_messages(msgs, state_key=observation)

    def next_prompt(self, observation: str) -> list[int]:
        """The next prompt after a plain observation (no tool results)."""
        return self.next_messages([{"role": "user", "content": observation}], state_key=observation)

    def next_messages(self, messages: list[Message], *, state_key: str) -> list[int]:
        """Prompt ids of the next turn, after the env answered with ``messages``."""
        inputs, reply = self.tool_exchanges[-1]
        self.pending_obs = state_key
        self.pending = messages
        if self.history == "last_k":
            return self._last_k_prompt()
        before = self.messages + inputs
        with_reply = self._render_msgs([*before, reply], generation_prompt=False)
        rendered = self._render_msgs([*before, reply, *messages])
        self.messages = [*before, reply]
        if not (self.extends_previous and with_reply.startswith(self._rendered) and rendered.startswith(with_reply)):
            return self._rerender(rendered)
        turn_text = with_reply[len(self._rendered) :]  # the assistant turn as the template writes it
        stop = self._extra or getattr(self.tokenizer, "eos_token", None) or ""
        if not stop or stop not in turn_text:
            return self._rerender(rendered)
        cut = turn_text.rindex(stop) + (len(stop) if self._extra else 0)  # the model wrote the stop token itself
        delta = turn_text[cut:] + rendered[len(with_reply) :]
        self._rendered = rendered
        self.ids = self.ids + self._encode(delta)
        self.text += delta
        self._check_budget(len(self.ids))
        return list(self.ids)

    # ------------------------------------------------------------ helpers
    def _window(self) -> list[Any]:
        return self.tool_exchanges

    def _window_ids(self, kept: list[Any]) -> list[int]:
        msgs = list(self.system)
        for inputs, reply in kept:
            msgs += [*inputs, reply]
        return self._encode(self._render_msgs(msgs + self.pending))
