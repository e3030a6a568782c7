"""Nim against a random opponent: the small custom env of the journeys in tests/api/test_custom_env_journeys.py.

It is uploaded as source (``nim.py``, entry point ``nim:NimEnv``) and never imported by the tests themselves.
"""

from rockroll.envs import StepOutcome, TextEnv


class NimEnv(TextEnv[int]):
    instructions = "A heap of stones: take 1, 2 or 3 each turn; I answer at random. Take the last stone to win."

    def _reset(self, options):
        self.heap = int(self.np_random.integers(5, 10))
        return {}

    def _parse_action(self, answer):
        return int(answer) if answer in ("1", "2", "3") and int(answer) <= self.heap else None

    def _step(self, take):
        self.heap -= take
        if self.heap == 0:
            return StepOutcome("You took the last stone.", 1.0, True, effective=True, success=True)
        reply = int(self.np_random.integers(1, min(3, self.heap) + 1))
        self.heap -= reply
        if self.heap == 0:
            return StepOutcome(f"I took {reply}, the last stone.", 0.0, True, effective=True, success=False)
        return StepOutcome(f"I took {reply}. {self._render()}", 0.0, False, effective=True, success=False)

    def _render(self):
        return f"{self.heap} stones left."

    def _get_state(self):
        return {"heap": self.heap}

    def _set_state(self, data):
        self.heap = data["heap"]

    def action_candidates(self):
        return [str(n) for n in range(1, min(3, self.heap) + 1)]
