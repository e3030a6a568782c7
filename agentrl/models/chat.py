"""Turning an episode's messages into prompt token ids, turn after turn.

The conversation follows the env's chat: ``env.system_prompt()`` as the system message,
observations as user messages, the model's responses as assistant messages, rendered with the
tokenizer's own chat template.

Two history modes:

* ``full``: every prompt is the previous prompt + the previous response tokens (exactly as the
  engine produced them, stop token included) + the tokens of the new text the template adds
  (end of the assistant turn, the new user message, the generation prompt). The new text is found
  by rendering the whole conversation and cutting off what was already there, then tokenised
  alone and *appended*, so prompts extend each other token for token and
  ``Trajectory.to_samples("concat")`` works. Should a template rewrite earlier turns (some strip
  reasoning from old assistant messages), the builder falls back to re-rendering the whole prompt
  and sets ``extends_previous = False``: use the ``per_turn`` layout then.
* ``last_k``: system + the last ``k`` exchanges + the new observation, re-rendered each turn;
  older exchanges are also dropped while the prompt exceeds the context budget.

Either way, ``tokenizer.decode(prompt_ids)`` is the text the model saw, and each response is
decoded once, into the action text the env receives.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Literal

from rockroll.envs.errors import RockrollError

__all__ = ["PromptBuilder", "ContextExceeded", "HistoryMode", "ObservationFormat", "format_observation"]

HistoryMode = Literal["full", "last_k"]
ObservationFormat = Literal["raw", "cells"]


def format_observation(observation: str, style: ObservationFormat = "raw") -> str:
    """The observation as the policy sees it: ``raw``, or ``cells`` (each line's characters spaced apart)."""
    if style == "raw":
        return observation
    if style == "cells":
        return "\n".join(" ".join(line) for line in observation.split("\n"))
    raise ValueError(f"observation format must be 'raw' or 'cells', got {style!r}")


#: last_k prompts kept per tokenizer: a policy that sees a short window meets the same prompts again and again
#: (a FrozenLake cell on one map: every episode of the group), and rendering a chat template costs ~75 us
PROMPT_CACHE_SIZE = 8192
_prompt_caches: weakref.WeakKeyDictionary[Any, OrderedDict[tuple[tuple[str, str], ...], list[int]]] = (
    weakref.WeakKeyDictionary()
)
_cache_lock = threading.Lock()


def _cached_prompt(tokenizer: Any, messages: list[dict[str, str]], make: Any) -> list[int]:
    """``make(messages)``'s ids, from the tokenizer's cache of recent prompts when it holds them (a copy)."""
    key = tuple((m["role"], m["content"]) for m in messages)
    try:
        with _cache_lock:
            cache = _prompt_caches.setdefault(tokenizer, OrderedDict())
            ids = cache.get(key)
            if ids is not None:
                cache.move_to_end(key)
                return list(ids)
    except TypeError:  # a tokenizer that takes no weak reference: no cache
        return make(messages)
    ids = make(messages)
    with _cache_lock:
        cache[key] = list(ids)
        if len(cache) > PROMPT_CACHE_SIZE:
            cache.popitem(last=False)
    return ids


class ContextExceeded(RockrollError):
    """The next prompt plus a full response would not fit in the context budget (the agent's doing)."""

    def __init__(self, needed: int, budget: int) -> None:
        super().__init__(f"the prompt needs {needed} tokens with the response, the context budget is {budget}")
        self.needed = needed
        self.budget = budget


class PromptBuilder:
    """Builds each turn's prompt ids for one episode (see the module docstring).

    Args:
        tokenizer: Hugging Face tokenizer with a chat template (or :class:`CharTokenizer`).
        system_prompt: the env's instructions ("" for none).
        history: ``full`` or ``last_k``.
        last_k: exchanges kept in ``last_k`` mode.
        max_context_tokens: budget for prompt + response (None: unlimited).
        max_new_tokens: response budget reserved in every prompt's context.
    """

    def __init__(
        self,
        tokenizer: Any,
        system_prompt: str,
        *,
        history: HistoryMode = "full",
        last_k: int = 2,
        max_context_tokens: int | None = None,
        max_new_tokens: int = 64,
    ) -> None:
        if history not in ("full", "last_k"):
            raise ValueError(f"history must be 'full' or 'last_k', got {history!r}")
        self.tokenizer = tokenizer
        self.history = history
        self.last_k = last_k
        self.budget = max_context_tokens
        self.max_new_tokens = max_new_tokens
        self.system: list[dict[str, str]] = [{"role": "system", "content": system_prompt}] if system_prompt else []
        self.exchanges: list[tuple[str, str]] = []  # (observation, response text)
        self.pending_obs = ""
        self.ids: list[int] = []  # full mode: the conversation so far, in tokens
        self.text = ""  # full mode: decode(ids)
        self._rendered = ""  # full mode: the template's rendering of the last prompt
        self._extra = ""
        self.extends_previous = True
        self.last_text = ""  # the last response, decoded

    # ------------------------------------------------------------- helpers
    def _render(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _render_ids(self, messages: list[dict[str, str]]) -> list[int]:
        return self._encode(self._render(messages))

    def _messages(self, exchanges: list[tuple[str, str]], obs: str) -> list[dict[str, str]]:
        msgs = list(self.system)
        for o, r in exchanges:
            msgs += [{"role": "user", "content": o}, {"role": "assistant", "content": r}]
        return msgs + [{"role": "user", "content": obs}]

    def _check_budget(self, n_prompt: int) -> None:
        if self.budget is not None and n_prompt + self.max_new_tokens > self.budget:
            raise ContextExceeded(n_prompt + self.max_new_tokens, self.budget)

    # ----------------------------------------------------------------- API
    def first_prompt(self, observation: str) -> list[int]:
        """Prompt ids of the first turn (raises :class:`ContextExceeded`)."""
        self.pending_obs = observation
        if self.history == "last_k":
            return self._last_k_prompt()
        self._rendered = self._render(self._messages([], observation))
        self.ids = self._encode(self._rendered)
        self.text = self._rendered
        self._check_budget(len(self.ids))
        return list(self.ids)

    def add_response(self, response_ids: list[int]) -> str:
        """Record the model's response; return its text (special tokens dropped) for the env."""
        content = self.tokenizer.decode(response_ids, skip_special_tokens=True)
        self.last_text = content
        self.exchanges.append((self.pending_obs, content))
        self._append_response(response_ids)
        return content

    def _append_response(self, response_ids: list[int]) -> None:
        """Full mode: the response's tokens, as sampled, extend the conversation; its stop token is noted."""
        if self.history != "full":
            return
        specials = set(getattr(self.tokenizer, "all_special_ids", None) or [self.tokenizer.eos_token_id])
        ended = bool(response_ids) and response_ids[-1] in specials
        self._extra = self.tokenizer.decode(response_ids[-1:], skip_special_tokens=False) if ended else ""
        self.ids = self.ids + list(response_ids)
        self.text += self.tokenizer.decode(response_ids, skip_special_tokens=False)

    def chat_messages(self) -> list[dict[str, Any]]:
        """The conversation as messages, for an engine that renders it itself (chat mode): every exchange."""
        return self._messages(self.exchanges, self.pending_obs)  # type: ignore[return-value]

    def add_chat_reply(self, reply: Any) -> str:
        """Record a chat server's reply (:class:`~rockroll.agentrl.engines.chat_mode.ChatReply`); its text is the
        action (a text env has no tools to call)."""
        self.last_text = str(reply.text)
        self.exchanges.append((self.pending_obs, self.last_text))
        return self.last_text

    def after_step(self, step: tuple[Any, ...], observation_format: ObservationFormat = "raw") -> list[int]:
        """Prompt ids of the next turn, after the env's ``step`` answer ``(obs, reward, terminated, truncated,
        info)``: its observation as the policy sees it (:func:`format_observation`)."""
        return self.next_prompt(format_observation(step[0], observation_format))

    def next_prompt(self, observation: str) -> list[int]:
        """Prompt ids of the next turn, after the env answered ``observation``."""
        self.pending_obs = observation
        if self.history == "last_k":
            return self._last_k_prompt()
        content = self.exchanges[-1][1]
        rendered = self._render(self._messages(self.exchanges, observation))
        expected = self._rendered + content
        if not (rendered.startswith(expected) and self.extends_previous):
            return self._rerender(rendered)  # the template rewrote history (per_turn layout only)
        tail = rendered[len(expected) :]
        produced = self._extra  # the stop token that ended the response, if any
        delta = tail[len(produced) :] if produced and tail.startswith(produced) else tail
        self._rendered = rendered
        self.ids = self.ids + self._encode(delta)
        self.text += delta
        self._check_budget(len(self.ids))
        return list(self.ids)

    def _rerender(self, rendered: str) -> list[int]:
        """The whole prompt re-rendered: prompts no longer extend each other (``per_turn`` layout only)."""
        self.extends_previous = False
        self._rendered = rendered
        self.ids = self._encode(rendered)
        self.text = rendered
        self._check_budget(len(self.ids))
        return list(self.ids)

    def _window(self) -> list[Any]:
        """The exchanges a ``last_k`` prompt may keep, oldest first."""
        return self.exchanges

    def _window_ids(self, kept: list[Any]) -> list[int]:
        """The ``last_k`` prompt of the ``kept`` exchanges and the pending observation."""
        return _cached_prompt(self.tokenizer, self._messages(kept, self.pending_obs), self._render_ids)

    def _last_k_prompt(self) -> list[int]:
        k = max(0, self.last_k)
        window = self._window()
        kept = window[-k:] if k else []
        while True:
            ids = self._window_ids(kept)
            fits = self.budget is None or len(ids) + self.max_new_tokens <= self.budget
            if fits or not kept:
                break
            kept = kept[1:]
        self._check_budget(len(ids))
        return ids
