"""A tool env for tests: registers ``EchoTools-v0`` when imported (as ROCKROLL_ENV_MODULES does).

Tools ``echo(text)`` (answers ``echo: <text>``) and ``finish()`` (ends the episode, reward 1). A turn without
a call is nudged. The env is also an upload's entry point (``rr_tool_echo:EchoTools``).
"""

from __future__ import annotations

from typing import Any

import rockroll.envhub as envhub
from rockroll.envs.core import StepOutcome
from rockroll.envs.tool_env import ToolEnv, render_results
from rockroll.envs.tools import Tool, ToolAction, ToolResult

ECHO = Tool(
    "echo",
    "Say something back.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False},
)
FINISH = Tool("finish", "End the episode.")


class EchoTools(ToolEnv):
    """Echoes what the agent asks; ``finish`` ends the episode."""

    tools = (ECHO, FINISH)
    instructions = "Call echo with some text, then finish."

    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        self.last = f"hello {int(self.np_random.integers(1000))}"
        self.finished = False
        return {}

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if name == "finish":
            self.finished = True
            return "bye"
        self.last = str(arguments["text"])
        return f"echo: {self.last}"

    def _no_call(self, text: str) -> StepOutcome[ToolAction]:
        return StepOutcome("call a tool", 0.0, False, effective=False, success=False)

    def _after_calls(self, results: list[ToolResult]) -> StepOutcome[ToolAction]:
        done = self.finished
        return StepOutcome(render_results(results), 1.0 if done else 0.0, done, effective=True, success=done)

    def _render(self) -> str:
        return f"last: {self.last}"

    def _get_state(self) -> dict[str, Any]:
        return {"last": self.last, "finished": self.finished}

    def _set_state(self, data: dict[str, Any]) -> None:
        self.last, self.finished = data["last"], data["finished"]

    def action_candidates(self) -> list[str]:
        return ["hi"]


envhub.register("EchoTools-v0", EchoTools, max_steps=10, override=True)
