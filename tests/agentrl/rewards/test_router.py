"""Routing by tag: rewards built from config, infra failures as outcomes (never zeros), per-tag metrics."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from rockroll.agentrl.rewards import (
    REWARDS,
    RewardRouter,
    Sample,
    UnknownTagError,
    register_reward,
    route_metrics,
)
from rockroll.envs.config import ConfigError

ROUTES = {
    "gsm": {"reward": "math"},
    "qa": {"reward": "exact", "options": {"extract": "last_line"}},
    "cd": {"reward": "countdown"},
    "qa2": {"reward": "exact", "options": {"extract": "last_line"}},
}


@pytest.fixture
def flaky() -> Iterator[dict[str, int]]:
    """Test rewards: ``boom`` raises, ``slow`` blocks until released, ``flaky`` fails once, ``text`` returns no number."""
    calls = {"flaky": 0}
    release = threading.Event()

    def boom(prompt: str, response: str, metadata: dict) -> float:
        raise RuntimeError("reward bug")

    def slow(prompt: str, response: str, metadata: dict) -> float:
        release.wait(30)
        return 1.0

    async def flaky_fn(prompt: str, response: str, metadata: dict) -> float:
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise ConnectionError("judge down")
        return 0.75

    def text(prompt: str, response: str, metadata: dict) -> str:
        return "high"

    for name, fn in (("boom_t", boom), ("slow_t", slow), ("flaky_t", flaky_fn), ("text_t", text)):
        register_reward(name, fn)
    yield calls
    release.set()
    for name in ("boom_t", "slow_t", "flaky_t", "text_t"):
        REWARDS.remove(name)


def test_routes_score_by_tag_and_share_equal_rewards() -> None:
    with RewardRouter({"routes": ROUTES}) as router:
        assert router.rewards["qa"] is router.rewards["qa2"]
        samples = [
            Sample("1/2 as a decimal?", "gsm", {"answer": "0.5"}),
            Sample("capital?", "qa", {"answer": "Paris"}),
            Sample("make 20", "cd", {"numbers": [2, 5, 6], "target": 20}),
            Sample("capital?", "qa", {"answer": "Paris"}),
        ]
        out = router.score_batch_sync(samples, [r"\boxed{\frac12}", "hmm\nParis", "<answer>(6-2)*5</answer>", "Rome"])
    assert [o.score for o in out] == [1.0, 1.0, 1.0, 0.0]
    assert not any(o.infra for o in out) and out[0].details["correct"]
    m = route_metrics(out)
    assert m["reward/qa/mean"] == 0.5 and m["reward/qa/count"] == 2 and m["reward/qa/infra_failures"] == 0
    assert m["reward/gsm/mean"] == 1.0 and m["reward/gsm/latency_s"] > 0 and "reward/qa2/count" not in m


def test_an_unknown_tag_is_a_config_error_naming_the_known_tags() -> None:
    with RewardRouter({"routes": ROUTES}) as router:
        with pytest.raises(UnknownTagError) as e:
            router.score_batch_sync([Sample("q", "gsm", {"answer": "1"}), Sample("q", "gsm9k", {})], ["1", "1"])
        assert isinstance(e.value, ValueError)
        assert "gsm, qa, cd, qa2" in str(e.value) and "Did you mean 'gsm'" in str(e.value)
        with pytest.raises(UnknownTagError):
            router.required_fields("nope")
        assert router.required_fields("cd") == ("numbers", "target")


def test_bad_config_names_the_dotted_key() -> None:
    with pytest.raises(ConfigError) as e:
        RewardRouter({"routes": {"a": {"reward": "maths"}}})
    assert e.value.key == "routes.a.reward" and "math" in str(e.value)
    with pytest.raises(ConfigError) as e:
        RewardRouter({"routes": {"a": {"reward": "math", "options": {"format_weigth": 0.1}}}})
    assert e.value.key == "routes.a.options.format_weigth"
    with pytest.raises(ConfigError):
        RewardRouter({"routes": {}})


def test_raising_and_non_numbers_are_infra_not_zero(flaky: dict[str, int]) -> None:
    cfg = {"routes": {"b": {"reward": "boom_t"}, "t": {"reward": "text_t"}}}
    with RewardRouter(cfg) as router:
        out = router.score_batch_sync([Sample("q", "b"), Sample("q", "t")], ["x", "y"])
    assert all(o.infra and o.score == 0.0 for o in out)
    assert "reward bug" in out[0].error and out[1].error
    m = route_metrics(out)
    assert m["reward/b/infra_failures"] == 1 and "reward/b/mean" not in m


def test_a_timeout_is_infra(flaky: dict[str, int]) -> None:
    with RewardRouter({"routes": {"s": {"reward": "slow_t"}}, "timeout_s": 0.2}) as router:
        (out,) = router.score_batch_sync([Sample("q", "s")], ["x"])
    assert out.infra and "reward_timeout_s" in out.error and out.latency_s < 10


def test_infra_failures_are_retried(flaky: dict[str, int]) -> None:
    with RewardRouter({"routes": {"f": {"reward": "flaky_t"}}, "infra_retries": 1}) as router:
        (out,) = asyncio.run(router.score_batch([Sample("q", "f")], ["x"]))
    assert not out.infra and out.score == 0.75 and out.attempts == 2 and flaky["flaky"] == 2
