"""``WebShopTools-v0``: WebShop-v0 played with tool calls, ``search(query)`` and ``click(target)``.

The same shop, goals, pages, reward and ending as :class:`~rockroll.envs.webshop.env.WebShopEnv` (and its
settings); only the action interface differs: ``search(query="...")`` is the text form's ``search[...]``,
``click(target="...")`` its ``click[...]`` (``WebShop-v0`` keeps the text form). Each call's result is the page
it leads to; clicking ``buy now`` buys, scores and ends the episode (later calls of the turn are not run).

An action the page does not offer (a search away from the search page, a click of an element not listed)
is an error result saying why, and the turn costs ``format_penalty``, like the text form's unavailable
action; so does a turn without a call (a nudge: the page again) and a call the schemas refuse. One
difference: ``click("back to search")`` on the search page reloads it (not effective, no penalty), so each tool
has a valid call in every state (:meth:`WebShopToolEnv.tool_examples`).
"""

from __future__ import annotations

from typing import Any

from rockroll.envs.core import StepOutcome
from rockroll.envs.tool_env import ToolEnv, render_results
from rockroll.envs.tools import Tool, ToolAction, ToolCall, ToolResult, one_string
from rockroll.envs.webshop.env import WebShopEnv, goal_query
from rockroll.envs.webshop.pages import BACK, canonical
from rockroll.envs.webshop.render import render_page

__all__ = ["WebShopToolEnv", "TOOLS", "UnavailableAction", "to_tool_call"]


TOOLS = (
    Tool(
        "search",
        "Search the shop (on the search page only); returns the first page of results.",
        one_string("query", "what to search for, e.g. sulfate free shampoo", 200),
    ),
    Tool(
        "click",
        "Click an element listed on the current page (a result, an option, 'next >', '< prev', 'back to search', "
        "a section, 'buy now'); returns the new page. 'buy now' buys the item and ends the episode.",
        one_string("target", "the element as listed on the page, e.g. next >", 200),
    ),
)

_TOOL_FORMAT = (
    'Act by calling the tools: on the search page search(query=...), e.g. search(query="sulfate free shampoo"); '
    'on other pages click(target=...) with one of the listed elements, e.g. click(target="next >") or '
    'click(target="buy now"). A turn without a tool call does nothing.'
)


class UnavailableAction(ValueError):
    """The current page does not offer this action: the call's error result says why."""


def to_tool_call(action: str, call_id: str) -> ToolCall:
    """A text-form action (``search[...]`` or ``click[...]``, no tags) as the tool call that does the same."""
    verb, _, rest = action.partition("[")
    arg = rest.removesuffix("]")
    if verb == "search":
        return ToolCall(call_id, "search", {"query": arg})
    if verb == "click":
        return ToolCall(call_id, "click", {"target": arg})
    raise ValueError(f"not a WebShop action: {action!r}")


class WebShopToolEnv(ToolEnv, WebShopEnv):  # type: ignore[misc]  # ToolEnv's hooks replace WebShopEnv's text ones
    """WebShop with tool calls (see the module docstring); the constructor is :class:`WebShopEnv`'s."""

    tools = TOOLS
    action_format = _TOOL_FORMAT
    _outcome: StepOutcome[Any] | None = None  # the purchase's outcome, once bought
    _refused = 0  # calls of this turn that the page did not offer
    _moved = False  # a call of this turn changed the page

    # ---------------------------------------------------------------- hooks
    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        self._outcome, self._refused, self._moved = None, 0, False
        return WebShopEnv._reset(self, options)

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._outcome is not None:
            return "not run: you have bought already"
        arg = str(arguments["query" if name == "search" else "target"])
        page = self._stack[-1]
        if name == "click" and page["kind"] == "search" and canonical(arg) == BACK:
            return self._render()  # the search page again: a valid no-op (see the module docstring)
        action = self._classify(f"{name}[{arg}]")
        if isinstance(action, str):
            self._refused += 1
            raise UnavailableAction(action)
        out = WebShopEnv._step(self, action)
        self._moved = self._moved or out.effective
        if out.terminated:
            self._outcome = out
        return out.observation

    def _after_calls(self, results: list[ToolResult]) -> StepOutcome[ToolAction]:
        (refused, moved), self._refused, self._moved = (self._refused, self._moved), 0, False
        obs = render_results(results)
        if self._outcome is not None:
            out = self._outcome
            return StepOutcome(obs, out.reward, True, effective=True, success=out.success, info=out.info)
        errors = sum(r.error for r in results)
        if results and results[-1].error:  # the last call showed no page: show it
            obs += f"\n\nThe current page:\n{self._render()}"
        # an unavailable action costs format_penalty, like the text form's; once a turn, and not on top of the
        # penalty ToolEnv adds for calls its schemas refuse (the errors that are not refusals)
        penalty = self.format_penalty if refused and errors == refused else 0.0
        return StepOutcome(obs, penalty, False, effective=moved, success=False)

    def _no_call(self, text: str) -> StepOutcome[ToolAction]:
        obs = self._render()
        if self._goal is not None:
            feedback = "Invalid action: no tool was called; call search or click."
            obs = render_page(self._stack[-1], self._goal, self._shop, feedback=feedback)
        return StepOutcome(obs, self.format_penalty, False, effective=False, success=False)

    def _set_state(self, data: dict[str, Any]) -> None:
        WebShopEnv._set_state(self, data)
        self._outcome, self._refused, self._moved = None, 0, False

    # ------------------------------------------------------------ public API
    def tool_examples(self) -> list[ToolCall]:
        """Valid calls on the current page, one of each tool on the search page (none before ``reset`` or after
        buying)."""
        if self._goal is None or self._outcome is not None:
            return []
        page = self._stack[-1]
        if page["kind"] == "search":
            return [
                ToolCall("example-search", "search", {"query": goal_query(self._goal)}),
                ToolCall("example-click", "click", {"target": BACK}),
            ]
        return [ToolCall("example-click", "click", {"target": BACK})]

    def action_candidates(self) -> list[str]:
        """None: this env's actions are tool calls (:meth:`tool_examples`), not answer text."""
        return []
