"""The base of tool envs: a :class:`~rockroll.envs.core.TextEnv` whose turns call declared tools.

A :class:`ToolEnv` declares :attr:`tools` (:class:`~rockroll.envs.tools.Tool`) and implements

* ``_call(name, arguments) -> str``: run one valid call (its arguments passed the tool's schema); what it
  returns is the call's result; an exception it raises becomes an error result with its message (an env
  error, never a crash of the run);
* ``_no_call(text) -> StepOutcome``: a turn without a call (a final answer, or a nudge: the env's choice);
* ``_after_calls(results) -> StepOutcome``: the step's outcome once a turn's calls ran (default: the results
  as the observation, no reward, the episode goes on); a tool that ends the episode (``submit``) records it
  for this hook to read;
* ``tool_examples() -> list[ToolCall]``: valid calls in the current state, at least one per tool (what
  :func:`~rockroll.envs.checker.check_env` calls to check that every tool runs).

``step`` takes text (a turn with no call) or a :class:`~rockroll.envs.tools.ToolAction`. Bad calls are
the agent's mistakes (:func:`~rockroll.envs.tools.check_call`: unknown tool, arguments failing the schema;
more than :data:`~rockroll.envs.tools.MAX_CALLS_PER_TURN` calls; calls the parser could not read, the action's
``problems``, answered first): each gets a result saying what was wrong,
the turn costs ``format_penalty`` once and reports ``action_is_valid=False``, and the episode goes on.
Results longer than :data:`~rockroll.envs.tools.MAX_RESULT_CHARS` are cut with a note.

Every step's ``info`` adds ``tool_results`` (one mapping per call, in order: ``tool_call_id``, ``name``,
``content``, ``error``) and the counts ``tool_calls``, ``malformed_calls``, ``unknown_tools``, ``bad_arguments``,
``tool_errors``: what an agent turns into tool messages, and what training and evaluation count.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from rockroll.envs.core import StepOutcome, TextEnv
from rockroll.envs.errors import ActionTypeError, ResetNeeded
from rockroll.envs.tools import (
    MAX_CALLS_PER_TURN,
    Action,
    Tool,
    ToolAction,
    ToolCall,
    ToolResult,
    as_tool_action,
    check_call,
)

__all__ = ["ToolEnv", "render_results"]


def render_results(results: list[ToolResult]) -> str:
    """The results as one observation text (for agents that read text, not tool messages)."""
    return "\n".join(f"[{r.name}{' error' if r.error else ''}] {r.content}" for r in results)


class ToolEnv(TextEnv[ToolAction], abc.ABC):
    """A text env whose actions are turns with tool calls (see the module docstring)."""

    #: the functions the agent may call (OpenAI function schemas)
    tools: ClassVar[tuple[Tool, ...]] = ()
    action_format = "Call the tools you are given; answer in plain text when you are done."

    # ------------------------------------------------------------ hooks
    @abc.abstractmethod
    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one valid call; its result text (an exception: an error result)."""

    @abc.abstractmethod
    def _no_call(self, text: str) -> StepOutcome[ToolAction]:
        """A turn without a call."""

    def _after_calls(self, results: list[ToolResult]) -> StepOutcome[ToolAction]:
        """The outcome of a turn whose calls ran (default: the results, no reward, the episode goes on)."""
        return StepOutcome(render_results(results), 0.0, False, effective=True, success=False)

    def tool_examples(self) -> list[ToolCall]:
        """Valid calls in the current state, at least one per tool: ``check_env`` runs each one (each in a
        fresh episode) and expects a result that is not an error. Default: none (``check_env`` then fails)."""
        return []

    # TextEnv's text hooks: a tool env reads structured turns instead
    def _parse_action(self, answer: str) -> ToolAction | None:
        return ToolAction(answer)

    def _step(self, action: ToolAction) -> StepOutcome[ToolAction]:
        return self._no_call(action.text)

    # ------------------------------------------------------------ the step
    def _run_call(self, call: ToolCall) -> tuple[ToolResult, str]:
        """One call's result and what kind of mistake it was ('' none, 'unknown', 'arguments', 'raised')."""
        problem = check_call(call, self.tools)
        if problem:
            kind = "unknown" if problem.startswith("unknown tool") else "arguments"
            return ToolResult.cut(call.id, call.name, problem, error=True), kind
        try:
            return ToolResult.cut(call.id, call.name, str(self._call(call.name, dict(call.arguments)))), ""
        except Exception as e:  # noqa: BLE001 - a tool that raises answers with its message
            return ToolResult.cut(call.id, call.name, f"{type(e).__name__}: {e}", error=True), "raised"

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:  # type: ignore[override]
        try:
            turn = as_tool_action(action)
        except ActionTypeError:
            raise
        if self._needs_reset:
            raise ResetNeeded(f"{type(self).__name__}.step() called before reset() or after the episode ended")
        counts = {
            "tool_calls": len(turn.calls),
            "malformed_calls": len(turn.problems),
            "unknown_tools": 0,
            "bad_arguments": 0,
            "tool_errors": 0,
        }
        if not turn.calls and not turn.problems:
            out = self._no_call(turn.text)
            results: list[ToolResult] = []
            valid = True
        else:
            results = [ToolResult.cut("", "", f"malformed tool call: {p}", error=True) for p in turn.problems]
            valid = not turn.problems
            for i, call in enumerate(turn.calls):
                if i >= MAX_CALLS_PER_TURN:
                    note = f"not run: a turn makes at most {MAX_CALLS_PER_TURN} calls"
                    results.append(ToolResult(call.id, call.name, note, error=True))
                    valid = False
                    continue
                result, kind = self._run_call(call)
                results.append(result)
                key = {"unknown": "unknown_tools", "arguments": "bad_arguments", "raised": "tool_errors"}.get(kind)
                if key:
                    counts[key] += 1
                    valid = valid and kind == "raised"
            out = self._after_calls(results)
        reward = out.reward + (0.0 if valid else self.format_penalty)
        self._success = out.success
        if out.terminated:
            self._needs_reset = True
        info: dict[str, Any] = {"action_is_valid": valid, "action_is_effective": out.effective, "success": out.success}
        info.update(self._extra_info())
        info.update(out.info)
        info.update(counts, tool_results=[r.to_dict() for r in results])
        return out.observation, reward, out.terminated, False, info
