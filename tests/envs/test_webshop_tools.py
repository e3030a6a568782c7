"""WebShopTools-v0, WebShop-v0 with tool calls: ``check_env`` passes, the oracle's tool turns score what its
text answers score, unavailable actions and bad calls are error results (with the text form's penalty) and
the episode goes on, forks play on, and the text form is unchanged."""

from __future__ import annotations

import pytest

import rockroll.envhub as envhub
from rockroll.envs import check_env
from rockroll.envs.experts import expert_for
from rockroll.envs.tools import ToolAction, ToolCall, check_tools
from rockroll.envs.webshop import WebShopToolEnv
from rockroll.envs.webshop.oracle import WebShopOracle
from rockroll.envs.webshop.tool_env import to_tool_call

KW = {"num_products": 100, "results_per_page": 3, "result_labels": "position"}


def _turn(*calls: tuple[str, dict]) -> ToolAction:
    return ToolAction("", tuple(ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)))


def _play(env, seed: int, expert) -> tuple[float, int]:
    env.reset(seed=seed)
    act = expert(env)
    for turn in range(1, 30):
        action = act()
        _obs, reward, terminated, truncated, _info = env.step(
            f"<answer>{action}</answer>" if isinstance(action, str) else action
        )
        if terminated or truncated:
            return reward, turn
    raise AssertionError("the expert never bought")


@pytest.mark.parametrize("kwargs", [{}, KW])
def test_check_env_passes(kwargs: dict) -> None:
    check_env(envhub.make("WebShopTools-v0", **kwargs), make=lambda: envhub.make("WebShopTools-v0", **kwargs))


def test_registration_tools_and_prompt() -> None:
    spec = envhub.spec("WebShopTools-v0")
    assert "tools" in spec.tags and spec.supports_fork
    env = envhub.make("WebShopTools-v0")
    check_tools(env.unwrapped.tools)
    assert [t.name for t in env.unwrapped.tools] == ["search", "click"]
    assert "search(query=" in env.system_prompt() and "<answer>" not in env.system_prompt()
    assert env.action_candidates() == []
    assert to_tool_call("search[red shoes]", "a") == ToolCall("a", "search", {"query": "red shoes"})
    assert to_tool_call("click[buy now]", "b") == ToolCall("b", "click", {"target": "buy now"})


@pytest.mark.parametrize("kwargs", [{}, KW])
def test_the_oracles_tool_turns_score_what_its_text_answers_score(kwargs: dict) -> None:
    tools, text = envhub.make("WebShopTools-v0", **kwargs), envhub.make("WebShop-v0", **kwargs)
    for seed in range(1_000_000, 1_000_015):
        played = _play(tools, seed, expert_for)
        assert played == _play(text, seed, expert_for), seed
    assert _play(tools, 3, expert_for)[0] == 1.0


def test_unavailable_actions_and_bad_calls_are_error_results(kwargs: dict = KW) -> None:
    env = envhub.make("WebShopTools-v0", format_penalty=-0.25, **kwargs)
    env.reset(seed=2)
    mistakes = [  # (turn, said, count): each costs format_penalty once, and the page is shown again
        (_turn(("click", {"target": "buy now"})), "cannot be clicked on this page", "tool_errors"),
        (_turn(("open", {"url": "x"})), "unknown tool 'open'", "unknown_tools"),
        (_turn(("search", {"query": 3})), "fail its schema", "bad_arguments"),
        (_turn(("click", {})), "'target' is a required property", "bad_arguments"),
        (_turn(("click", {"target": "nope"}), ("search", {})), "cannot be clicked", "bad_arguments"),  # once
    ]
    for turn, said, count in mistakes:
        obs, reward, terminated, truncated, info = env.step(turn)
        assert reward == -0.25 and not terminated and not truncated and not info["action_is_effective"], said
        assert info[count] == 1 and info["tool_results"][0]["error"] and said in info["tool_results"][0]["content"]
        assert "The current page:" in obs and "[Search]" in obs
    obs, reward, terminated, _tr, info = env.step("search[shoes]")  # text is not an action here: a nudge
    assert reward == -0.25 and not terminated and "no tool was called" in obs
    obs, reward, _t, _tr, info = env.step(_turn(("click", {"target": "back to search"})))
    assert reward == 0.0 and info["action_is_valid"] and not info["action_is_effective"]  # the search page reloads
    obs, reward, _t, _tr, info = env.step(_turn(("search", {"query": "shoes"}), ("search", {"query": "socks"})))
    assert reward == -0.25 and info["page"] == "results" and info["action_is_effective"]
    assert "search is only available on the search page" in info["tool_results"][1]["content"]


def test_a_turn_of_several_calls_buys_and_stops(kwargs: dict = KW) -> None:
    env = envhub.make("WebShopTools-v0", **kwargs)
    env.reset(seed=5)
    oracle, calls = WebShopOracle(), []
    text = envhub.make("WebShop-v0", **kwargs)  # the oracle's plan, played on the text form
    text.reset(seed=5)
    while True:
        action = oracle.action(text)
        calls.append(to_tool_call(action, f"c{len(calls)}"))
        *_, terminated, _tr, _info = text.step(f"<answer>{action}</answer>")
        if terminated:
            break
    calls.append(ToolCall("late", "search", {"query": "more"}))
    obs, reward, terminated, _tr, info = env.step(ToolAction("", tuple(calls)))
    assert terminated and reward == _info["reward_details"]["reward"] and info["purchased"] == _info["purchased"]
    assert info["tool_results"][-1]["content"] == "not run: you have bought already"
    assert "[click] " in obs and "Purchase complete" in obs


def test_a_fork_after_tool_turns_plays_on_like_the_original() -> None:
    env = envhub.make("WebShopTools-v0")
    env.reset(seed=7)
    act = expert_for(env)
    env.step(act())  # search
    env.step(_turn(("click", {"target": "nope"})))  # a refused click: nothing to carry into the fork
    fork = envhub.make("WebShopTools-v0")
    fork.set_state(env.get_state())
    assert fork.render() == env.render()
    env_act, fork_act = expert_for(env), expert_for(fork)
    for _ in range(10):
        a, b = env.step(env_act()), fork.step(fork_act())
        assert a == b
        if a[2]:
            break
    assert isinstance(env.unwrapped, WebShopToolEnv) and a[2]


def test_the_text_form_is_unchanged() -> None:
    env = envhub.make("WebShop-v0")
    env.reset(seed=0)
    assert "<answer>search[" in env.system_prompt() and env.action_candidates()[0].startswith("search[")
    obs, reward, *_ = env.step("<answer>click[back to search]</answer>")  # unavailable on the search page
    assert reward == env.unwrapped.format_penalty and "Invalid action" in obs
