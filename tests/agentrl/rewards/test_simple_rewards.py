"""The reward registry, reward options, and the simple rewards: exact, regex, countdown, math (math-verify)."""

from __future__ import annotations

import pytest

from rockroll.agentrl.rewards import REWARDS, Reward, RewardResult, UnknownRewardError, make_reward, register_reward
from rockroll.envs.config import ConfigError
from rockroll.envs.errors import RockrollError


def test_unknown_reward_names_the_known_ones() -> None:
    with pytest.raises(UnknownRewardError) as e:
        make_reward("maths")
    assert isinstance(e.value, (ValueError, LookupError, RockrollError))
    assert "math" in str(e.value) and "code" in str(e.value) and "Did you mean 'math'" in str(e.value)


def test_bad_options_name_the_dotted_key() -> None:
    with pytest.raises(ConfigError) as e:
        make_reward("math", {"format_weight": 2}, key="routes.gsm8k.options")
    assert e.value.key == "routes.gsm8k.options.format_weight"
    with pytest.raises(ConfigError) as e:
        make_reward("exact", {"nope": 1})
    assert e.value.key == "options.nope"


def test_a_plain_function_and_an_async_one_register() -> None:
    def length(prompt: str, response: str, metadata: dict) -> float:
        return len(response) / 10

    async def shout(prompt: str, response: str, metadata: dict) -> RewardResult:
        return RewardResult(float(response.isupper()), {"upper": response.isupper()})

    try:
        register_reward("length_t", length)
        register_reward("shout_t", shout, requires=("x",))
        r, a = make_reward("length_t"), make_reward("shout_t")
        assert isinstance(r, Reward) and not r.is_async and r("p", "abcde", {}) == 0.5
        assert a.is_async and a.required_fields() == ("x",)
        with pytest.raises(ValueError, match="already registered"):
            register_reward("length_t", length)
    finally:
        for name in ("length_t", "shout_t"):
            if name in REWARDS:
                REWARDS.remove(name)


@pytest.mark.parametrize(
    ("response", "answer", "score"),
    [
        ("<answer> Paris </answer>", "paris", 1.0),
        ("<answer>Paris</answer> then <answer>Lyon</answer>", "Paris", 0.0),  # the last tag counts
        ("Paris", "Paris", 0.0),  # no answer tag: a format failure, scored 0
        ("<answer>NYC</answer>", ["New York", "NYC"], 1.0),
    ],
)
def test_exact(response: str, answer: object, score: float) -> None:
    assert make_reward("exact")("q", response, {"answer": answer}).score == score


def test_exact_case_sensitive_and_last_line() -> None:
    r = make_reward("exact", {"case_sensitive": True, "extract": "last_line"})
    assert r("q", "thinking...\nParis\n", {"answer": "Paris"}).score == 1.0
    assert r("q", "thinking...\nparis", {"answer": "Paris"}).score == 0.0


def test_regex_from_config_or_from_the_sample() -> None:
    fixed = make_reward("regex", {"pattern": r"\d{4}-\d{2}-\d{2}", "fullmatch": True, "extract": "answer_tag"})
    assert fixed.required_fields() == ()
    assert fixed("q", "<answer>2024-01-31</answer>", {}).score == 1.0
    assert fixed("q", "<answer>on 2024-01-31</answer>", {}).score == 0.0
    per_sample = make_reward("regex", {"ignore_case": True})
    assert per_sample.required_fields() == ("pattern",)
    assert per_sample("q", "The CAT sat", {"pattern": "cat"}).score == 1.0


@pytest.mark.parametrize(
    ("equation", "score"),
    [
        ("(6 - 2) * 5", 1.0),
        ("5 * (6 - 2) = 20", 1.0),
        ("6 * 5 - 10", 0.0),  # 10 is not given
        ("(6 - 2) * 5 + 0", 0.0),  # 0 is not given
        ("6 * 5", 0.0),  # 2 unused
        ("__import__('os')", 0.0),  # not arithmetic: refused, never evaluated
        ("(6 - 2) / 0 * 5", 0.0),
    ],
)
def test_countdown(equation: str, score: float) -> None:
    r = make_reward("countdown")
    out = r("q", f"<answer>{equation}</answer>", {"numbers": [2, 5, 6], "target": 20})
    assert out.score == score, out.details


@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("0.5", r"So the probability is \boxed{\frac{1}{2}}."),
        (r"\frac{1}{2}", r"\boxed{0.5}"),
        ("0.5", r"\boxed{\dfrac12}"),
        ("1/3", r"\boxed{\frac{1}{3}}"),
        (r"x^2 + 2x + 1", r"\boxed{(x+1)^2}"),
        (r"\{1, 2\}", r"\boxed{\{2, 1\}}"),
        ("3", r"\boxed{3.0}"),
        (r"\sqrt{2}/2", r"\boxed{\frac{\sqrt{2}}{2}}"),
    ],
)
def test_math_equivalences(gold: str, response: str) -> None:
    out = make_reward("math")("q", response, {"answer": gold})
    assert out.details["correct"] and out.details["formatted"] and out.score == 1.0, out.details


@pytest.mark.parametrize(("gold", "response"), [("3", r"\boxed{4}"), (r"\frac{1}{2}", r"\boxed{\frac{1}{3}}")])
def test_math_wrong_answers_keep_the_format_part(gold: str, response: str) -> None:
    out = make_reward("math", {"format_weight": 0.2})("q", response, {"answer": gold})
    assert out.details == {**out.details, "correct": False, "formatted": True} and out.score == pytest.approx(0.2)


def test_math_format_component_and_answer_location() -> None:
    unboxed = make_reward("math")("q", "The answer is 0.5", {"answer": r"\frac12"})
    assert unboxed.details["correct"] and not unboxed.details["formatted"] and unboxed.score == pytest.approx(0.9)
    strict = make_reward("math", {"require_format": True})
    assert strict("q", "The answer is 0.5", {"answer": "0.5"}).score == 0.0
    tagged = make_reward("math", {"answer_from": "answer_tag", "format": "answer_tag", "format_weight": 0})
    assert tagged("q", "2+2 is 5? <answer>4</answer>", {"answer": "4"}).score == 1.0
    assert tagged("q", r"\boxed{4}", {"answer": "4"}).score == 0.0  # no tag: nothing read
