"""Hypothesis over what agents and callers send to envs: action text, constructor kwargs, seeds.

Every built-in env's action parser maps any text to an action or ``None`` (never raises); a step
with any text (legal actions mixed with noise, control characters, huge strings) returns a
well-typed transition; any constructor kwargs either build the env or raise ``EnvConfigError``;
any seed either resets or raises ``ValueError``/``TypeError``. SWE-v0 runs commands, so only its
parser is fuzzed here.
"""

from __future__ import annotations

import json
import math
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rockroll.envhub as envhub
from rockroll.envs.core import parse_answer
from rockroll.envs.errors import EnvConfigError

PLAYABLE = ["FrozenLake-v0", "Sokoban-v0", "LargerSokoban-v0", "WebShop-v0", "ALFWorld-v0"]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)

noise = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)
tags = st.sampled_from(["<answer>", "</answer>", "<ANSWER>", "</Answer>", "<answer", "answer>", "\n", "\x00", ":"])


@cache
def _env(env_id: str) -> Any:
    env = envhub.make(env_id)
    env.reset(seed=0)
    return env


@st.composite
def agent_text(draw: st.DrawFn, env_id: str) -> str:
    """Text around, inside and between answer tags, often near a legal action."""
    legal = _env(env_id).action_candidates() or ["noop"]
    parts = draw(st.lists(st.one_of(noise, tags, st.sampled_from(legal)), max_size=8))
    if draw(st.booleans()):
        parts.append(f"<answer>{draw(st.sampled_from(legal))}{draw(st.sampled_from(['', ' ', 'x', '!!']))}</answer>")
    return "".join(parts)


@pytest.mark.parametrize("env_id", PLAYABLE + ["SWE-v0"])
def test_action_parser_never_raises(env_id: str) -> None:
    env = _env(env_id)

    @FAST
    @given(text=agent_text(env_id))
    def check(text: str) -> None:
        answer = parse_answer(text)
        if answer is not None:
            env.unwrapped._parse_action(answer)  # an action or None, never an exception

    check()


@pytest.mark.parametrize("env_id", PLAYABLE)
def test_any_text_steps_safely(env_id: str) -> None:
    env = envhub.make(env_id)
    env.reset(seed=1)

    @FAST
    @given(text=agent_text(env_id))
    def check(text: str) -> None:
        obs, reward, terminated, truncated, info = env.step(text)
        assert isinstance(obs, str) and math.isfinite(float(reward))
        assert {"action_is_valid", "action_is_effective", "success"} <= set(info)
        assert info["action_is_valid"] or reward == env.format_penalty or terminated or truncated
        json.dumps(env.get_state())
        if terminated or truncated:
            env.reset(seed=len(text))

    check()


def test_huge_action_text_is_safe() -> None:
    env = envhub.make("FrozenLake-v0")
    env.reset(seed=0)
    obs, *_rest, info = env.step("<answer>" * 50_000 + "Left" + "</answer>" * 3)
    assert isinstance(obs, str) and isinstance(info["action_is_valid"], bool)


values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=20), st.lists(st.integers(), max_size=3),
)  # fmt: skip


@FAST
@given(kwargs=st.dictionaries(st.sampled_from(["size", "p", "is_slippery", "format_penalty"]), values, max_size=3))
def test_frozenlake_kwargs_build_or_raise_config_error(kwargs: dict[str, Any]) -> None:
    try:
        env = envhub.make("FrozenLake-v0", **kwargs)
    except EnvConfigError:
        return
    env.reset(seed=0)


@FAST
@given(
    kwargs=st.dictionaries(st.sampled_from(["dim_room", "num_boxes", "max_steps", "search_depth"]), values, max_size=2)
)
def test_sokoban_kwargs_build_or_raise_config_error(kwargs: dict[str, Any]) -> None:
    try:
        env = envhub.make("Sokoban-v0", **kwargs)
        env.reset(seed=0)
    except EnvConfigError:
        return


@FAST
@given(seed=st.one_of(st.none(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=5)))
def test_any_seed_resets_or_is_refused(seed: Any) -> None:
    env = _env("FrozenLake-v0")
    try:
        obs, info = env.reset(seed=seed)
    except (ValueError, TypeError):
        return
    assert isinstance(obs, str) and isinstance(info, dict)
