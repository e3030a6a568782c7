"""A custom env for tests: registers ``Echo-v0`` when imported (as ROCKROLL_ENV_MODULES does)."""

from __future__ import annotations

from typing import Any

import rockroll.envhub as envhub
from rockroll.envs.core import StepOutcome, TextEnv


class EchoEnv(TextEnv[str]):
    """Echoes the answer; the episode ends when the agent says 'stop'."""

    instructions = "Say anything; say stop to finish."

    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        self.last = f"hello {int(self.np_random.integers(1000))}"
        return {}

    def _parse_action(self, answer: str) -> str | None:
        return answer or None

    def _step(self, action: str) -> StepOutcome[str]:
        self.last = action
        done = action == "stop"
        return StepOutcome(self._render(), 1.0 if done else 0.0, done, effective=True, success=done)

    def _render(self) -> str:
        return f"echo: {self.last}"

    def _get_state(self) -> dict[str, Any]:
        return {"last": self.last}

    def _set_state(self, data: dict[str, Any]) -> None:
        self.last = data["last"]

    def action_candidates(self) -> list[str]:
        return ["hi", "stop"]


envhub.register("Echo-v0", EchoEnv, max_steps=10, override=True)
