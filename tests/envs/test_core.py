"""The contract's own machinery: answer parsing, the base class, MaxSteps."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rockroll.envs import MaxSteps, StepOutcome, TextEnv, parse_answer
from rockroll.envs.errors import EnvConfigError, ResetNeeded, StateError


class Counter(TextEnv[int]):
    """Add the number you answer; reach 3 to win."""

    instructions = "Count to three."

    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        self.total = int(options.get("start", 0))
        return {"start": self.total}

    def _parse_action(self, answer: str) -> int | None:
        return int(answer) if answer in {"0", "1", "2"} else None

    def _step(self, action: int) -> StepOutcome[int]:
        self.total += action
        won = self.total == 3
        return StepOutcome(self._render(), 1.0 if won else 0.0, self.total >= 3, effective=action > 0, success=won)

    def _render(self) -> str:
        return f"total={self.total}"

    def _get_state(self) -> dict[str, Any]:
        return {"total": self.total}

    def _set_state(self, data: dict[str, Any]) -> None:
        self.total = int(data["total"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer>Up</answer>", "Up"),
        ("I think... <ANSWER>  Left \n</Answer> done", "Left"),
        ("<answer>a</answer> then <answer>b</answer>", "b"),
        ("<answer>multi\nline</answer>", "multi\nline"),
        ("no tags", None),
        ("<answer>unclosed", None),
        ("", None),
    ],
)
def test_parse_answer(text: str, expected: str | None) -> None:
    assert parse_answer(text) == expected


@given(st.text())
def test_parse_answer_never_raises(text: str) -> None:
    out = parse_answer(text)
    assert out is None or isinstance(out, str)


@given(st.text(max_size=200))
def test_any_string_action_is_safe(text: str) -> None:
    env = Counter()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(text)
    assert isinstance(obs, str)
    assert info["action_is_valid"] == (parse_answer(text) in {"0", "1", "2"})


def test_base_class_reports_info_and_ends_episodes() -> None:
    env = Counter(format_penalty=-0.5)
    assert env.system_prompt().startswith("Count to three.")
    assert "<answer>" in env.system_prompt()
    obs, info = env.reset(seed=1, options={"start": 1})
    assert obs == "total=1" and info == {
        "action_is_valid": True,
        "action_is_effective": False,
        "success": False,
        "start": 1,
    }
    assert env.step("<answer>7</answer>")[1:3] == (-0.5, False)
    _, reward, terminated, _, info = env.step("<answer>2</answer>")
    assert (reward, terminated, info["success"], info["action_is_effective"]) == (1.0, True, True, True)
    with pytest.raises(ResetNeeded):
        env.step("<answer>1</answer>")


def test_bad_seed_and_options() -> None:
    env = Counter()
    with pytest.raises(EnvConfigError):
        env.reset(seed=-1)
    with pytest.raises(EnvConfigError):
        env.reset(seed="3")  # type: ignore[arg-type]
    with pytest.raises(EnvConfigError):
        env.reset(options=[1])  # type: ignore[arg-type]


def test_set_state_rejects_foreign_snapshots() -> None:
    env = Counter()
    env.reset(seed=0)
    with pytest.raises(StateError):
        env.set_state({"nope": 1})
    with pytest.raises(StateError):
        env.set_state({**env.get_state(), "env": "Other"})
    with pytest.raises(StateError):
        env.set_state({**env.get_state(), "data": {}})


def test_max_steps_truncates_and_round_trips() -> None:
    env = MaxSteps(Counter(), max_steps=3)
    env.reset(seed=0)
    assert env.step("<answer>0</answer>")[3] is False
    snap = env.get_state()
    assert env.step("<answer>0</answer>")[3] is False
    assert env.step("<answer>0</answer>")[3] is True
    with pytest.raises(ResetNeeded):
        env.step("<answer>0</answer>")
    env.set_state(snap)
    assert env.elapsed_steps == 1 and env.step("<answer>0</answer>")[3] is False
    assert env.system_prompt().startswith("Count")  # forwarded to the env
    with pytest.raises(EnvConfigError):
        MaxSteps(Counter(), max_steps=0)
